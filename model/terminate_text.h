// What a C++ program's std::terminate says on stderr before it aborts
// (libstdc++'s verbose handler, which every GCC and clang program on
// Linux has by default):
//
//   terminate called after throwing an instance of 'c10::DistBackendError'
//     what():  [PG ID 0 ...] Process group watchdog thread terminated ...
//
// PyTorch's NCCL watchdog ends a rank so: its thread throws, and the rank
// dies of SIGABRT. Read a rank's stderr a line at a time, so that the
// rank's root cause says which exception it was, not only the signal.
#pragma once

#include <string>
#include <string_view>

namespace ltd {

class TerminateText {
 public:
  // The longest text kept: the type and the first line of its what().
  static constexpr size_t kMaxText = 512;

  // One line of the rank's stderr, without its newline.
  void Line(std::string_view line);
  // The last terminate seen, in a line of at most kMaxText bytes:
  // "terminate called after throwing c10::DistBackendError: [PG ID 0
  // ...]" (without ": ..." when no what() followed), or "terminate called
  // without an active exception"; "" when none was seen.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  bool awaiting_what_ = false;  // text_ holds a type whose what() may come next
};

}  // namespace ltd
