// One way to turn a failed system call into a status: the call, what it
// was called on, and the OS's words, e.g. "open(/x/y): Permission denied".
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace ltd {

// NotFound for ENOENT, PermissionDenied for EACCES/EPERM/EROFS (callers
// tell those apart), Unavailable for everything else.
absl::Status PosixError(std::string_view call, std::string_view object, int err);

}  // namespace ltd
