#include "exec_spec.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "spawn_attr.h"
#include "str_util.h"

namespace ltd {

static_assert(kExecSpecFd <= kHighestSpawnTarget);

absl::Status CheckExecSpec(const std::string& cwd, const std::vector<std::string>& argv,
                           const std::vector<std::string>& env) {
  auto has_nul = [](const std::string& s) { return s.find('\0') != std::string::npos; };
  if (has_nul(cwd) || std::any_of(argv.begin(), argv.end(), has_nul) ||
      std::any_of(env.begin(), env.end(), has_nul)) {
    return absl::InvalidArgumentError("a NUL byte in the working directory, argv or environment");
  }
  return absl::OkStatus();
}

absl::StatusOr<Fd> WriteExecSpec(const std::string& cwd, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env) {
  if (absl::Status s = CheckExecSpec(cwd, argv, env); !s.ok()) return s;
  std::string spec = cwd;
  spec.push_back('\0');
  for (const auto* list : {&argv, &env}) {
    spec.append(std::to_string(list->size())).push_back('\0');
    for (const std::string& s : *list) spec.append(s).push_back('\0');
  }
  Fd fd(memfd_create("lt-exec-spec", MFD_CLOEXEC));
  if (!fd.valid()) return absl::UnavailableError(Cat("memfd_create: ", std::strerror(errno)));
  for (size_t off = 0; off < spec.size();) {
    const ssize_t n = write(fd.get(), spec.data() + off, spec.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(Cat("write(memfd): ", std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0)
    return absl::UnavailableError(Cat("lseek(memfd): ", std::strerror(errno)));
  if (absl::Status s = AboveSpawnFds(fd); !s.ok()) return s;
  return fd;
}

}  // namespace ltd
