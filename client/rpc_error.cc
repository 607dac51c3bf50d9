#include "rpc_error.h"

#include <cstring>

#include "ltd_status.h"

namespace ltd {

bool LostLtd(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::CANCELLED;
}

std::string RpcErrorLine(const grpc::Status& s, const std::string& socket,
                         const std::function<int()>& probe) {
  using grpc::StatusCode;
  const StatusCode code = s.error_code();
  if (s.error_details() == kLtdStatusMark && !s.error_message().empty()) return s.error_message();
  switch (code) {
    // Codes only ltd's own checks give (an ltd older than the mark says
    // them unmarked): its message.
    case StatusCode::INVALID_ARGUMENT:
    case StatusCode::NOT_FOUND:
    case StatusCode::ALREADY_EXISTS:
    case StatusCode::PERMISSION_DENIED:
    case StatusCode::FAILED_PRECONDITION:
    case StatusCode::OUT_OF_RANGE:
      if (!s.error_message().empty()) return s.error_message();
      break;
    default:
      break;
  }
  switch (code) {
    case StatusCode::UNAVAILABLE:
    case StatusCode::CANCELLED:
    case StatusCode::ABORTED:
    case StatusCode::UNKNOWN:
    case StatusCode::INTERNAL: {
      // The connection broke: ltd went away, or is on its way out.
      if (const int err = probe(); err != 0) {
        return "ltd is not running at " + socket + " (" + std::strerror(err) +
               "); start it with `systemctl start ltd` (or `ltd --socket " + socket + "`)";
      }
      if (code == StatusCode::UNKNOWN || code == StatusCode::INTERNAL) {
        return "ltd failed the request; try again, and see its log (`journalctl -u ltd`) if it "
               "fails again";
      }
      return "ltd is stopping or restarting; try again in a moment";
    }
    case StatusCode::DEADLINE_EXCEEDED:
      return "ltd did not answer in time (it is busy or stuck); try again in a moment";
    case StatusCode::UNIMPLEMENTED:
      return "this ltd does not know the request (it is older than this client); use the client "
             "that came with it, or upgrade ltd";
    case StatusCode::RESOURCE_EXHAUSTED:
      return "ltd's answer is larger than this client takes; ask for less (ps --state, logs "
             "--tail)";
    default:
      return "ltd refused the request (" + std::to_string(static_cast<int>(code)) +
             "); try again, and see its log (`journalctl -u ltd`) if it fails again";
  }
}

}  // namespace ltd
