#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "fd.h"
#include "posix_error.h"
#include "str_util.h"

namespace ltd {

absl::StatusOr<std::string> ReadFd(int fd, std::string_view name, size_t max) {
  std::string text;
  char buf[8192];
  while (text.size() < max) {
    const ssize_t n = read(fd, buf, std::min(sizeof buf, max - text.size()));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      // A process that exits while its /proc files are read gives ESRCH.
      return PosixError("read", name, errno);
    }
  }
  return text;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return PosixError("open", path, errno);
  return ReadFd(fd.get(), path, max);
}

absl::Status WriteWholeFile(const std::string& path, std::string_view text) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return PosixError("open", path, errno);
  ssize_t n;
  do {
    n = write(fd.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PosixError("write", path, errno);
  if (static_cast<size_t>(n) != text.size()) {
    return absl::InternalError(Cat("write(", path, "): short write"));
  }
  return absl::OkStatus();
}

absl::Status ReplaceFile(const std::string& path, std::string_view data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  // A new file of its own: a PATH.tmp already there (a crash's, or one
  // another user planted in a shared directory: a link to their file) is
  // removed, never written into.
  auto create = [&] {
    return Fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  };
  Fd fd = create();
  if (!fd.valid() && errno == EEXIST && unlink(tmp.c_str()) == 0) fd = create();
  if (!fd.valid()) return PosixError("open", tmp, errno);
  absl::Status s = absl::OkStatus();
  while (!data.empty() && s.ok()) {
    const ssize_t n = write(fd.get(), data.data(), data.size());
    if (n < 0 && errno != EINTR) s = PosixError("write", tmp, errno);
    if (n > 0) data.remove_prefix(static_cast<size_t>(n));
  }
  if (s.ok() && fdatasync(fd.get()) != 0) s = PosixError("fdatasync", tmp, errno);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = PosixError("rename", tmp, errno);
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

}  // namespace ltd
