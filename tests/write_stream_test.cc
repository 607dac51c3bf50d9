// A stream's last event and its end (Handle::PushAndFinish): one gRPC
// operation when nothing waits before the event, after the queue when
// something does; never both a Finish and a StartWriteAndFinish.
#include "write_stream.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ltd.grpc.pb.h"

namespace ltd::test {
namespace {

struct Traits {
  static bool Droppable(const v1::JobEvent&) { return false; }
  static v1::JobEvent Notice(uint64_t) { return {}; }
};
using Stream = WriteStream<v1::JobEvent, Traits>;

v1::JobEvent Started(const std::string& id) {
  v1::JobEvent ev;
  ev.set_started(id);
  return ev;
}

// Wait's stream: `serve` gets each call's handle, on a gRPC thread.
class Served final : public v1::Ltd::CallbackService {
 public:
  explicit Served(std::function<void(std::shared_ptr<Stream::Handle>)> serve)
      : serve_(std::move(serve)) {}
  grpc::ServerWriteReactor<v1::JobEvent>* Wait(grpc::CallbackServerContext*,
                                               const v1::JobRef*) override {
    auto* stream = new Stream();
    serve_(stream->handle());
    return stream;
  }

 private:
  std::function<void(std::shared_ptr<Stream::Handle>)> serve_;
};

class WriteStreamTest : public ::testing::Test {
 protected:
  void Serve(std::function<void(std::shared_ptr<Stream::Handle>)> serve) {
    char tmpl[] = "/tmp/lt-write-stream-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    service_ = std::make_unique<Served>(std::move(serve));
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    builder.AddListeningPort("unix:" + dir_ + "/s.sock", grpc::InsecureServerCredentials());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Ltd::NewStub(
        grpc::CreateChannel("unix:" + dir_ + "/s.sock", grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Every event of one call, and how it ended.
  std::vector<std::string> Read(grpc::Status* status) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::JobRef ref;
    auto reader = stub_->Wait(&ctx, ref);
    std::vector<std::string> got;
    v1::JobEvent ev;
    while (reader->Read(&ev)) got.push_back(ev.started());
    *status = reader->Finish();
    return got;
  }

  std::string dir_;
  std::unique_ptr<Served> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Ltd::Stub> stub_;
};

TEST_F(WriteStreamTest, TheLastEventAndTheEndGoOutTogetherWhenNothingWaits) {
  Serve([](std::shared_ptr<Stream::Handle> out) {
    EXPECT_TRUE(out->PushAndFinish(Started("only"), grpc::Status::OK));
    // Finished: nothing more is taken, and no second finish is made.
    EXPECT_FALSE(out->Push(Started("late")));
    out->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "a second finish"));
  });
  grpc::Status status;
  EXPECT_EQ(Read(&status), std::vector<std::string>{"only"});
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(WriteStreamTest, TheLastEventComesAfterEveryEventQueuedBeforeIt) {
  Serve([](std::shared_ptr<Stream::Handle> out) {
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(out->Push(Started(std::to_string(i))));
    EXPECT_TRUE(out->PushAndFinish(Started("end"), grpc::Status::OK));
  });
  grpc::Status status;
  const std::vector<std::string> got = Read(&status);
  ASSERT_EQ(got.size(), 51u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], std::to_string(i));
  EXPECT_EQ(got.back(), "end");
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(WriteStreamTest, ItsStatusIsTheOneGiven) {
  Serve([](std::shared_ptr<Stream::Handle> out) {
    EXPECT_TRUE(
        out->PushAndFinish(Started("x"), grpc::Status(grpc::StatusCode::NOT_FOUND, "gone")));
  });
  grpc::Status status;
  EXPECT_EQ(Read(&status), std::vector<std::string>{"x"});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "gone");
}

// A client that went before the end: the push says so, nothing breaks.
TEST_F(WriteStreamTest, AStreamWhoseReaderWentTakesNoLastEvent) {
  std::shared_ptr<Stream::Handle> kept;
  std::mutex mu;
  Serve([&](std::shared_ptr<Stream::Handle> out) {
    ASSERT_TRUE(out->Push(Started("first")));
    std::lock_guard lock(mu);
    kept = std::move(out);
  });
  {
    grpc::ClientContext ctx;
    v1::JobRef ref;
    auto reader = stub_->Wait(&ctx, ref);
    v1::JobEvent ev;
    ASSERT_TRUE(reader->Read(&ev));
    ctx.TryCancel();
    (void)reader->Finish();
  }
  std::shared_ptr<Stream::Handle> out;
  {
    std::lock_guard lock(mu);
    out = kept;
  }
  ASSERT_NE(out, nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (out->Push(Started("more")) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(out->PushAndFinish(Started("end"), grpc::Status::OK));
}

}  // namespace
}  // namespace ltd::test
