// The mark ltd puts on every error it answers with (grpc::Status's
// details): the status's message is ltd's own one line, to be shown as
// is. A status without it was made by gRPC itself ("Socket closed",
// "Cancelling all calls", "Deadline Exceeded"), whose wording a client
// never shows; it says what happened in its own words instead.
#pragma once

#include <string_view>

namespace ltd {

inline constexpr std::string_view kLtdStatusMark = "ltd.v1";

}  // namespace ltd
