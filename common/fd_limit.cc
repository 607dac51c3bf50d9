#include "fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ltd {

absl::Status RaiseFdLimit(uint64_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::InternalError(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  if (needed != 0 && lim.rlim_max != RLIM_INFINITY && lim.rlim_max < needed) {
    return absl::FailedPreconditionError(
        "the job needs about " + std::to_string(needed) + " open files, and the hard limit is " +
        std::to_string(lim.rlim_max) +
        ": raise it (ulimit -Hn, limits.conf, LimitNOFILE=) or run fewer ranks");
  }
  const rlim_t want = needed == 0 ? lim.rlim_max : static_cast<rlim_t>(needed);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur >= want) return absl::OkStatus();
  lim.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::InternalError(std::string("setrlimit(RLIMIT_NOFILE, ") + std::to_string(want) +
                               "): " + std::strerror(errno));
  }
  return absl::OkStatus();
}

}  // namespace ltd
