// ltctl's way to ltd: the socket, the reachability check that explains a
// daemon that is not running, and the one-line errors every verb ends with.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ltd.grpc.pb.h"

namespace ltd {

// ltctl's exit code for an error of its own or of ltd (SPEC: 1).
constexpr int kErrorExit = 1;

struct Globals {
  std::string socket;
  bool json = false;
};

// One line on stderr, whatever bytes `message` quotes; exits kErrorExit.
[[noreturn]] void Die(const std::string& message);
// A flag's value (flag_values.h), or ltctl ends with why.
template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}
// A failed RPC as one line: ltd's own, or rpc_error.h's for gRPC's.
[[noreturn]] void DieRpc(const Globals& g, const grpc::Status& s);

// 0 when ltd's socket at `path` takes a connection; else why not (errno).
int TryConnect(const std::string& path);
// A client of ltd on one connection to g.socket, made at once; dies with
// the OS's words if ltd is not there.
std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g);
// As Connect, but when ltd is not there: nullptr and the errno in *gone.
std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g, int* gone);
// JOB (an id or a name) as ltd has it now; dies with ltd's one line.
v1::Job ShowJob(const Globals& g, const std::string& job);
// JOB (an id or a name) as the id ltd resolves it to now.
std::string JobId(const Globals& g, const std::string& job);

}  // namespace ltd
