// Whole-file reads and writes by plain system calls: one reader for /proc,
// cgroupfs, records and the files ranks leave.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ltd {

// What `fd` holds from its offset on, at most `max` bytes (the rest stays
// unread); EINTR is retried. `name` names it in errors.
absl::StatusOr<std::string> ReadFd(int fd, std::string_view name, size_t max = SIZE_MAX);
// The file at `path`; NotFound when there is none (PosixError's codes).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max = SIZE_MAX);
// One write of `text` to an existing file (cgroupfs and /proc take a value
// in one write).
absl::Status WriteWholeFile(const std::string& path, std::string_view text);
// `data` as the whole of `path`: written to PATH.tmp (made new: one there
// already is removed first, not written into), synced, and renamed over
// it, so a reader sees the old file or the new, after a crash too. The
// .tmp is removed on failure. `mode` as open(2)'s
// (the umask applies).
absl::Status ReplaceFile(const std::string& path, std::string_view data, mode_t mode = 0600);

}  // namespace ltd
