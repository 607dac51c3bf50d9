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
  explicit WhoService(const ltd::Listener*& listener) : listener_(listener) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor(grpc::GenericCallbackServerContext* ctx, const ltd::Listener* listener) {
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
  const ltd::Listener*& listener_;
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

// Directly, or through the relay of clients' connections (ClientRelay):
// the caller is who connected, not the relay's end.
class Listener : public ::testing::TestWithParam<FdRelay> {};

TEST_P(Listener, CallersAreKnownByTheirConnectionAndForgottenWhenItCloses) {
  char tmpl[] = "/tmp/ltd-listener.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string socket = dir + "/ltd.sock";
  auto listener = ltd::Listener::Bind(socket, 0, GetParam());
  ASSERT_TRUE(listener.ok()) << listener.status();
  const ltd::Listener* raw = listener->get();
  WhoService service(raw);
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(&service);
  auto server = builder.BuildAndStart();
  ASSERT_TRUE(server);
  ASSERT_TRUE((*listener)->Start(server.get()).ok());
  if (GetParam() == FdRelay::kAlways) {
    ASSERT_NE((*listener)->relay(), nullptr);
  }

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
  if (const ClientRelay* relay = (*listener)->relay()) {
    EXPECT_TRUE(WaitFor([&] { return relay->connections() == 0; }, 30s)) << relay->connections();
  }

  (*listener)->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  listener->reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Relay, Listener, ::testing::Values(FdRelay::kAuto, FdRelay::kAlways),
                         [](const auto& info) {
                           return info.param == FdRelay::kAlways ? "relayed" : "direct";
                         });

}  // namespace
}  // namespace ltd::test
