// Writing one protocol line to the heartbeat fd without ever stalling or
// killing the rank.
//
// The fd is shared: shells and child processes inherited it and may write
// their own lines ("echo hb >&3"), so we never change its flags (no
// O_NONBLOCK). Instead each kind of fd gets a per-call way not to block:
// send(MSG_DONTWAIT) for sockets, pwritev2(RWF_NOWAIT) for pipes. Each line
// goes out in one call, so lines of concurrent writers never interleave.
#ifndef LTWORKER_SRC_LINE_WRITER_H_
#define LTWORKER_SRC_LINE_WRITER_H_

#include <cstdint>
#include <string_view>

namespace ltworker::internal {

enum class FdKind : std::uint8_t {
  kSocket,  // send(MSG_DONTWAIT | MSG_NOSIGNAL)
  kPipe,    // pwritev2(RWF_NOWAIT), SIGPIPE blocked around the call
  kOther,   // a file or terminal: a plain write(), which does not block for long
};

// Decides how lines are written to `fd`. Returns false (errno set) when `fd`
// is not open or not open for writing, so heartbeats are off.
bool ClassifyFd(int fd, FdKind* kind);

// Writes `line` (one whole line, at most kMaxLineBytes) to `fd` with a single
// syscall. Returns 0, or -1 with errno: EAGAIN when the reader is behind (the
// line is dropped; a partial write, which Linux does not do for lines this
// short, is also reported as EAGAIN), EPIPE when the reader is gone, or the
// syscall's own error. EINTR is retried. SIGPIPE never reaches the process.
int WriteLine(int fd, FdKind kind, std::string_view line);

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_LINE_WRITER_H_
