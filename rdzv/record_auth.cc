#include "record_auth.h"

#include <sys/stat.h>

#include <charconv>
#include <cstdint>
#include <string_view>

#include "bytes.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd::rdzv {
namespace {

constexpr char kMagic[] = "ltd-rdzv 1\n";
// A reader keeps this many answers; past it, it starts again (a value
// decoded again is a replay on this host, which holds).
constexpr size_t kMaxSeen = 4096;
// Refusals logged by key, at most.
constexpr size_t kMaxLogged = 64;

}  // namespace

absl::Status CheckRdzvAuth(const std::string& mode) {
  if (mode.empty() || mode == "munge" || mode == "none" || mode == "auto") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("--rdzv-auth '" +
                                    DisplayEscapeElided(mode, 64, Controls::kEscape) +
                                    "' is not munge, none or auto; give one of them");
}

std::string ResolveRdzvAuth(const std::string& mode, const std::string& socket) {
  if (!mode.empty() && mode != "auto") return mode;
  struct stat st {};
  return stat(socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? "munge" : "none";
}

RecordAuth::RecordAuth(std::unique_ptr<CredentialCodec> codec, uid_t owner)
    : codec_(std::move(codec)), owner_(owner) {}

std::string RecordAuth::Frame(uid_t uid, const std::string& key, const std::string& value) {
  return Cat(kMagic, uid, "\n", key, "\n", value);
}

absl::StatusOr<std::string> RecordAuth::Seal(const std::string& key,
                                             const std::string& value) const {
  if (!on()) return value;
  return codec_->Encode(Frame(owner_, key, value));
}

absl::StatusOr<std::string> RecordAuth::Check(const etcd::KeyValue& kv) const {
  if (kv.value.rfind("MUNGE:", 0) != 0) {
    return absl::PermissionDeniedError(
        "it is not a MUNGE credential (is its node run with --rdzv-auth none?)");
  }
  auto cred = codec_->Decode(kv.value);
  if (!cred.ok()) return cred.status();
  const std::string& p = cred->payload;
  const size_t magic = sizeof kMagic - 1;
  const size_t uid_end = p.find('\n', magic);
  const size_t key_end = uid_end == std::string::npos ? uid_end : p.find('\n', uid_end + 1);
  if (p.compare(0, magic, kMagic) != 0 || key_end == std::string::npos) {
    return absl::PermissionDeniedError("its credential holds no ltd record");
  }
  // The uid as Frame writes it: decimal, no sign or leading zero, a real
  // uid (below (uid_t)-1). Any other spelling is no frame of ours.
  const std::string_view uid_text = std::string_view(p).substr(magic, uid_end - magic);
  uint64_t inner64 = 0;
  const auto [end, ec] =
      std::from_chars(uid_text.data(), uid_text.data() + uid_text.size(), inner64);
  if (uid_text.empty() || ec != std::errc() || end != uid_text.data() + uid_text.size() ||
      (uid_text.size() > 1 && uid_text[0] == '0') ||
      inner64 >= static_cast<uint64_t>(static_cast<uid_t>(-1))) {
    return absl::PermissionDeniedError("its credential holds no ltd record");
  }
  const uid_t inner = static_cast<uid_t>(inner64);
  if (p.compare(uid_end + 1, key_end - uid_end - 1, kv.key) != 0) {
    return absl::PermissionDeniedError("its credential was made for another key");
  }
  // The owner's own process, or root's supervisor speaking for the owner.
  if (inner != owner_ || (cred->uid != owner_ && cred->uid != 0)) {
    return absl::PermissionDeniedError(Cat("it was written by uid ", cred->uid,
                                           cred->uid == 0 ? Cat(" for uid ", inner) : "",
                                           ", not by this run's owner (uid ", owner_, ")"));
  }
  return p.substr(key_end + 1);
}

std::optional<std::string> RecordAuth::Open(const etcd::KeyValue& kv) {
  if (!on()) return kv.value;
  const auto id = std::make_pair(kv.key, kv.mod_revision);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = seen_.find(id); it != seen_.end()) return it->second;
  }
  // Outside the lock: munged may take its time, and other readers go on.
  absl::StatusOr<std::string> value = Check(kv);
  std::function<void(int64_t, const std::string&, bool)> tell;
  int64_t total = 0;
  bool logged = false;
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.size() >= kMaxSeen) seen_.clear();
    auto [it, fresh] =
        seen_.emplace(id, value.ok() ? std::optional<std::string>(*value) : std::nullopt);
    if (value.ok() || !fresh) return it->second;
    if (absl::IsUnavailable(value.status())) {
      // munged unreachable says nothing of the record: not counted nor
      // remembered, so a later read tries again.
      seen_.erase(it);
      if (!unavailable_logged_) spdlog::warn("{}", std::string(value.status().message()));
      unavailable_logged_ = true;
      return std::nullopt;
    }
    line = Cat("refused etcd record ", DisplayEscapeElided(kv.key, 160, Controls::kEscape), ": ",
               value.status().message());
    ++refused_;
    last_ = line;
    total = refused_;
    tell = on_refused_;
    logged = logged_.size() < kMaxLogged && logged_.insert(kv.key).second;
    if (logged) spdlog::warn("{}", line);
  }
  if (tell) tell(total, line, logged);
  return std::nullopt;
}

int64_t RecordAuth::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

std::string RecordAuth::last_refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

void RecordAuth::OnRefused(std::function<void(int64_t, const std::string&, bool)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_refused_ = std::move(fn);
}

}  // namespace ltd::rdzv
