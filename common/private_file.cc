#include "private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "file_io.h"

namespace ltd {
namespace {

absl::Status Check(const std::string& flag, const std::string& path, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is not a regular file"));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(flag, " ", path, " is not owned by uid ",
                                                    geteuid(), "; chown it, and chmod 600"));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return absl::PermissionDeniedError(
        absl::StrCat(flag, " ", path, " is readable by others (mode ", mode, "); chmod 600 it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPrivateFile(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": ", std::strerror(errno)));
  }
  return Check(flag, path, st);
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& flag, const std::string& path) {
  // Checked on the fd read: no swap of the path between check and read.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(flag, " ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  absl::Status s =
      fstat(fd, &st) == 0
          ? Check(flag, path, st)
          : absl::InternalError(absl::StrCat("fstat ", path, ": ", std::strerror(errno)));
  absl::StatusOr<std::string> text = s.ok() ? ReadFd(fd, path, 64 * 1024) : s;
  close(fd);
  return text;
}

}  // namespace ltd
