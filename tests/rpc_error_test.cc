// A failed RPC as ltctl says it: ltd's own marked line as is; gRPC's own
// statuses (what its transport says when ltd stops) in ltctl's words,
// never gRPC's.
#include "rpc_error.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "ltd_status.h"

namespace ltd {
namespace {

const std::string kSocket = "/run/ltd/ltd.sock";
int Up() { return 0; }
int Gone() { return ECONNREFUSED; }

TEST(RpcError, LtdsOwnLineIsShownAsIs) {
  const grpc::Status s(grpc::StatusCode::UNAVAILABLE,
                       "ltd is shutting down; submit again once it is back",
                       std::string(kLtdStatusMark));
  EXPECT_EQ(RpcErrorLine(s, kSocket, Up), "ltd is shutting down; submit again once it is back");
  // An ltd older than the mark: its refusals are still its own words.
  const grpc::Status old(grpc::StatusCode::NOT_FOUND, "no job 'x'");
  EXPECT_EQ(RpcErrorLine(old, kSocket, Up), "no job 'x'");
}

// What gRPC's library says when ltd goes away, stops, or is slow: each a
// one-line message of ltctl's with none of gRPC's words.
TEST(RpcError, GrpcsOwnWordsNeverReachTheUser) {
  const std::vector<grpc::Status> library = {
      {grpc::StatusCode::UNAVAILABLE, "Socket closed"},
      {grpc::StatusCode::UNAVAILABLE, "Connection reset by peer"},
      {grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses"},
      {grpc::StatusCode::CANCELLED, "Cancelling all calls"},
      {grpc::StatusCode::CANCELLED, "CANCELLED"},
      {grpc::StatusCode::ABORTED, "Stream removed"},
      {grpc::StatusCode::INTERNAL, "Received RST_STREAM with error code 2"},
      {grpc::StatusCode::UNKNOWN, "Stream removed"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"},
      {grpc::StatusCode::UNIMPLEMENTED, "Method not found!"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "Received message larger than max (1 vs. 0)"},
      {grpc::StatusCode::UNAUTHENTICATED, "Unauthenticated"},
      {grpc::StatusCode::DATA_LOSS, ""},
  };
  for (const grpc::Status& s : library) {
    for (auto probe : {Up, Gone}) {
      const std::string line = RpcErrorLine(s, kSocket, probe);
      EXPECT_EQ(line.find(s.error_message().empty() ? "\x01" : s.error_message()),
                std::string::npos)
          << line;
      for (const char* grpc_word : {"Socket", "Cancelling", "Deadline", "Stream", "RST_STREAM",
                                    "Method", "CANCELLED", "UNAVAILABLE", "message larger"}) {
        EXPECT_EQ(line.find(grpc_word), std::string::npos) << line;
      }
      EXPECT_EQ(line.find('\n'), std::string::npos) << line;
      EXPECT_FALSE(line.empty());
    }
  }
  EXPECT_EQ(RpcErrorLine({grpc::StatusCode::UNAVAILABLE, "Socket closed"}, kSocket, Up),
            "ltd is stopping or restarting; try again in a moment");
  EXPECT_EQ(RpcErrorLine({grpc::StatusCode::CANCELLED, "Cancelling all calls"}, kSocket, Gone),
            "ltd is not running at /run/ltd/ltd.sock (Connection refused); start it with "
            "`systemctl start ltd` (or `ltd --socket /run/ltd/ltd.sock`)");
}

TEST(RpcError, LostLtdIsATransportEndNotARefusal) {
  EXPECT_TRUE(LostLtd({grpc::StatusCode::UNAVAILABLE, "Socket closed"}));
  EXPECT_TRUE(LostLtd({grpc::StatusCode::CANCELLED, "Cancelling all calls"}));
  EXPECT_FALSE(LostLtd({grpc::StatusCode::NOT_FOUND, "no job 'x'", std::string(kLtdStatusMark)}));
  EXPECT_FALSE(LostLtd({grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"}));
}

}  // namespace
}  // namespace ltd
