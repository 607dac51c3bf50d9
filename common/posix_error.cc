#include "posix_error.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "str_util.h"

namespace ltd {

absl::Status PosixError(std::string_view call, std::string_view object, int err) {
  std::string message = Cat(call, "(", object, "): ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

}  // namespace ltd
