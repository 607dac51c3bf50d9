// The message of a TORCHELASTIC_ERROR_FILE: what a rank that failed wrote
// there (torchelastic's {"message": {"message": "...", "extraInfo": ...}},
// a plain {"message": "..."}, or any text at all) becomes its root cause's
// message. The file is the rank's, so its user's: any bytes, up to what
// the supervisor reads of it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

// The longest message kept, as an `error TEXT` heartbeat line's
// (model/heartbeat.h): a root cause is in every record and every `show`,
// once per attempt.
inline constexpr size_t kMaxErrorFileMessage = 4096;

// The message, at most kMaxErrorFileMessage bytes: a longer one is cut
// between characters and ends in "… [+N bytes]". Text that is no JSON, or
// JSON the parser refuses (Python writes lone surrogates for bytes it could
// not decode), is the message as it is, rather than lost. None for a file
// of only white space, or JSON without a message.
std::optional<std::string> ErrorFileMessage(std::string_view text);

}  // namespace ltd
