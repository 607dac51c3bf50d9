// A failed RPC as the one line a user reads: ltd's own message when ltd
// said it (rpc/ltd_status.h's mark), else, for what gRPC says itself (a
// transport that closed, a deadline), what happened in ltctl's words and
// what to do. No gRPC wording reaches a user.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

namespace ltd {

// `probe`: whether ltd's socket takes a connection now (0, else errno);
// asked only for a status that may mean ltd is gone.
std::string RpcErrorLine(const grpc::Status& s, const std::string& socket,
                         const std::function<int()>& probe);

// An RPC that broke because ltd went away (it stopped, restarted or
// crashed), as opposed to one ltd refused.
bool LostLtd(const grpc::Status& s);

}  // namespace ltd
