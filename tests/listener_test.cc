// ltd's socket and who is calling: the peer name gRPC gives a connection
// handed over by fd (pinned here: a gRPC upgrade that changes it must fail
// this test, not open a hole), the credentials the kernel vouched for, and
// entries of closed connections dropped.
#include "listener.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>

#include "harness.h"

namespace ltd::test {
namespace {

// Answers every call with "PEER UID PID" as the listener knows the caller.
class WhoService final : public grpc::CallbackGenericService {
 public:
  explicit WhoService(const Listener*& listener) : listener_(listener) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor(grpc::GenericCallbackServerContext* ctx, const Listener* listener) {
        std::string text = ctx->peer();
        if (auto who = listener->Lookup(ctx->peer())) {
          text += " " + std::to_string(who->uid) + " " + std::to_string(who->pid);
        }
        grpc::Slice slice(text);
        reply_ = grpc::ByteBuffer(&slice, 1);
        StartRead(&request_);
      }
      void OnReadDone(bool) override { StartWriteAndFinish(&reply_, {}, grpc::Status::OK); }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_, reply_;
    };
    return new Reactor(ctx, listener_);
  }

 private:
  const Listener*& listener_;
};

std::string Call(const std::string& socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(std::string("who"));
  grpc::ByteBuffer request(&slice, 1), reply;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/test.Who/Ask", {}, &request, &reply, [&](grpc::Status s) {
    std::lock_guard lock(mu);
    status = s;
    done = true;
    cv.notify_one();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok()) return "error: " + status.error_message();
  std::vector<grpc::Slice> slices;
  (void)reply.Dump(&slices);
  std::string text;
  for (const auto& s : slices) text.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return text;
}

TEST(Listener, CallersAreKnownByTheirConnectionAndForgottenWhenItCloses) {
  char tmpl[] = "/tmp/ltd-listener.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string socket = dir + "/ltd.sock";
  auto listener = Listener::Bind(socket);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const Listener* raw = listener->get();
  WhoService service(raw);
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server);
  (*listener)->Start(server.get());

  const std::string answer = Call(socket);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(answer, m, std::regex(R"(fd:(\d+) (\d+) (\d+))"))) << answer;
  EXPECT_EQ(std::stoul(m[2]), getuid());
  EXPECT_EQ(std::stol(m[3]), getpid());
  // A peer name that is not a live connection of ours names nobody.
  EXPECT_FALSE((*listener)->Lookup("fd:0"));
  EXPECT_FALSE((*listener)->Lookup("unix:/x"));
  EXPECT_FALSE((*listener)->Lookup("fd:" + std::string(m[1]) + "x"));

  // Connections come and go; once they are closed they are forgotten.
  for (int i = 0; i < 300; ++i) ASSERT_NE(Call(socket).find(" "), std::string::npos);
  EXPECT_TRUE(WaitFor([&] { return (*listener)->known_connections() == 0; }, 30s))
      << (*listener)->known_connections();

  (*listener)->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  listener->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ltd::test
