#include "drain_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "file_io.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"

namespace ltd {
namespace {

constexpr size_t kMaxReasonBytes = 4096;
constexpr size_t kMaxDeadlineBytes = 32;

std::string PathIn(const std::string& state_dir) { return state_dir + "/drain"; }
std::string DeadlinePathIn(const std::string& state_dir) { return state_dir + "/drain-deadline"; }

// `data` as the whole of `path`, or, with nullopt, no file at `path`.
absl::Status Replace(const std::string& path, const std::optional<std::string_view>& data) {
  if (data) return ReplaceFile(path, *data);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return PosixError("unlink", path, errno);
  return absl::OkStatus();
}

}  // namespace

std::optional<std::string> LoadDrain(const std::string& state_dir) {
  auto text = ReadWholeFile(PathIn(state_dir), kMaxReasonBytes);
  if (text.ok()) return *text;
  if (absl::IsNotFound(text.status())) return std::nullopt;
  spdlog::warn("{}: staying drained", std::string(text.status().message()));
  return std::string("(its reason could not be read)");
}

absl::Status SaveDrain(const std::string& state_dir, const std::optional<std::string>& reason) {
  if (!reason) return Replace(PathIn(state_dir), std::nullopt);
  return Replace(PathIn(state_dir), std::string_view(*reason).substr(0, kMaxReasonBytes));
}

std::optional<WallTime> LoadDrainDeadline(const std::string& state_dir) {
  const std::string path = DeadlinePathIn(state_dir);
  auto text = ReadWholeFile(path, kMaxDeadlineBytes);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) {
      spdlog::warn("{}: the drain's deadline is forgotten", std::string(text.status().message()));
    }
    return std::nullopt;
  }
  int64_t ms = 0;
  if (!absl::SimpleAtoi(*text, &ms) || ms <= 0) {
    spdlog::warn("{}: not a time ('{}'); the drain's deadline is forgotten", path, ForLog(*text));
    return std::nullopt;
  }
  return WallTime(std::chrono::milliseconds(ms));
}

absl::Status SaveDrainDeadline(const std::string& state_dir,
                               const std::optional<WallTime>& deadline) {
  if (!deadline) return Replace(DeadlinePathIn(state_dir), std::nullopt);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline->time_since_epoch()).count();
  return Replace(DeadlinePathIn(state_dir), std::to_string(ms));
}

}  // namespace ltd
