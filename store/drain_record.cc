#include "drain_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "fd.h"
#include "file_io.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"

namespace ltd {
namespace {

constexpr size_t kMaxReasonBytes = 4096;

std::string PathIn(const std::string& state_dir) { return state_dir + "/drain"; }

}  // namespace

std::optional<std::string> LoadDrain(const std::string& state_dir) {
  auto text = ReadWholeFile(PathIn(state_dir), kMaxReasonBytes);
  if (text.ok()) return *text;
  if (absl::IsNotFound(text.status())) return std::nullopt;
  spdlog::warn("{}: staying drained", std::string(text.status().message()));
  return std::string("(its reason could not be read)");
}

absl::Status SaveDrain(const std::string& state_dir, const std::optional<std::string>& reason) {
  const std::string path = PathIn(state_dir);
  if (!reason) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return PosixError("unlink", path, errno);
    return absl::OkStatus();
  }
  const std::string tmp = path + ".tmp";
  Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return PosixError("open", tmp, errno);
  std::string_view data = std::string_view(*reason).substr(0, kMaxReasonBytes);
  while (!data.empty()) {
    const ssize_t n = write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      unlink(tmp.c_str());
      return PosixError("write", tmp, err);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (fdatasync(fd.get()) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return PosixError("rename", path, err);
  }
  return absl::OkStatus();
}

}  // namespace ltd
