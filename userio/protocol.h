// What lt-userio (userio/main.cc) and the root side that starts it
// (process/user_io.cc) say to each other. Both are built from this tree, so
// nothing here is versioned; lt-userio still checks every byte it reads.
//
// fds of lt-userio, and nothing else:
//   0  `write`: the lines to append, as frames (below); `check`: /dev/null
//   1  its answers: one line, "ok" or "fail INDEX MESSAGE", and in `write`
//      later "stopped INDEX MESSAGE" for a file that refused a write
//   2  /dev/null
//   3  the request (a memfd): TRUNCATE \0 COUNT \0 then, per file,
//      DIR_ONLY \0 PATH \0 (TRUNCATE, DIR_ONLY: "0" or "1")
#pragma once

#include <cstddef>
#include <cstdint>

namespace ltd::userio {

constexpr int kFramesFd = 0;
constexpr int kAnswerFd = 1;
constexpr int kRequestFd = 3;

// A frame: its header, then `length` bytes for file `file` (the request's
// order). Both in the host's order: the two ends share one machine.
struct FrameHeader {
  uint32_t file;
  uint32_t length;
};
static_assert(sizeof(FrameHeader) == 8);

// The most one frame carries; longer chunks go in several.
constexpr size_t kMaxFrame = 1 << 20;
// The most files one request names, and the longest request.
constexpr size_t kMaxFiles = 1 << 17;
constexpr size_t kMaxRequest = 64u << 20;
// The longest answer line (a message names a path, PATH_MAX at most).
constexpr size_t kMaxAnswer = 8192;

}  // namespace ltd::userio
