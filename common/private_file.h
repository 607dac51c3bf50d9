// A file that holds a secret (etcd's user and password): used only when it
// is a regular file of this process's user that no one else may read, as
// ssh does with a private key. A path others can read leaks the secret
// whatever the program does with it afterwards.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ltd {

// `flag` names the option that gave `path`, for the message.
absl::Status CheckPrivateFile(const std::string& flag, const std::string& path);
// Checks it, then reads it whole (64 KiB at most).
absl::StatusOr<std::string> ReadPrivateFile(const std::string& flag, const std::string& path);

}  // namespace ltd
