// CredentialCodec on libmunge (Debian's libmunge-dev).
#include <munge.h>

#include <cstdlib>
#include <ctime>

#include "credential.h"

namespace ltd::rdzv {
namespace {

// Our words for munged's errors: no library wording reaches users.
std::string Why(munge_err_t e) {
  switch (e) {
    case EMUNGE_SOCKET:
      return "munged cannot be reached at its socket (is it running?)";
    case EMUNGE_BAD_CRED:
    case EMUNGE_BAD_VERSION:
    case EMUNGE_BAD_CIPHER:
    case EMUNGE_BAD_MAC:
    case EMUNGE_BAD_ZIP:
      return "it is not a MUNGE credential";
    case EMUNGE_BAD_REALM:
      return "its credential is of another MUNGE realm";
    case EMUNGE_CRED_INVALID:
      return "its credential does not hold (forged, altered, or made with another MUNGE key)";
    case EMUNGE_CRED_EXPIRED:
      return "its credential has expired (older than its MUNGE TTL, or the hosts' clocks differ)";
    case EMUNGE_CRED_REWOUND:
      return "its credential was made in the future (the hosts' clocks differ)";
    case EMUNGE_CRED_UNAUTHORIZED:
      return "its credential is not for this user";
    case EMUNGE_BAD_LENGTH:
      return "it is longer than munged takes";
    default:
      return "munged failed (error " + std::to_string(static_cast<int>(e)) + ")";
  }
}

// A munge context freed on every path.
struct Ctx {
  munge_ctx_t ctx = munge_ctx_create();
  ~Ctx() {
    if (ctx != nullptr) munge_ctx_destroy(ctx);
  }
};

class Munge final : public CredentialCodec {
 public:
  explicit Munge(std::string socket) : socket_(std::move(socket)) {}

  absl::StatusOr<std::string> Encode(std::string_view payload) override {
    Ctx c;
    if (c.ctx == nullptr) return absl::ResourceExhaustedError("out of memory for a MUNGE context");
    munge_ctx_set(c.ctx, MUNGE_OPT_SOCKET, socket_.c_str());
    munge_ctx_set(c.ctx, MUNGE_OPT_TTL, static_cast<int>(MUNGE_TTL_MAXIMUM));
    char* cred = nullptr;
    const munge_err_t e =
        munge_encode(&cred, c.ctx, payload.data(), static_cast<int>(payload.size()));
    if (e != EMUNGE_SUCCESS) {
      std::free(cred);
      return absl::UnavailableError("cannot make a MUNGE credential at " + socket_ + ": " + Why(e) +
                                    "; start munged there, give --munge-socket, or run every node "
                                    "of the run with --rdzv-auth none");
    }
    std::string out(cred);
    std::free(cred);
    return out;
  }

  absl::StatusOr<Credential> Decode(std::string_view credential) override {
    Ctx c;
    if (c.ctx == nullptr) return absl::ResourceExhaustedError("out of memory for a MUNGE context");
    munge_ctx_set(c.ctx, MUNGE_OPT_SOCKET, socket_.c_str());
    const std::string text(credential);  // munge_decode reads up to a NUL
    void* buf = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    const munge_err_t e = munge_decode(text.c_str(), c.ctx, &buf, &len, &uid, &gid);
    // A replayed credential held (its MAC was checked first) and was
    // decoded on this host before: see credential.h.
    if (e != EMUNGE_SUCCESS && e != EMUNGE_CRED_REPLAYED) {
      std::free(buf);
      if (e == EMUNGE_SOCKET) {
        return absl::UnavailableError("cannot check a MUNGE credential at " + socket_ + ": " +
                                      Why(e));
      }
      return absl::PermissionDeniedError(Why(e));
    }
    Credential out;
    out.uid = uid;
    out.gid = gid;
    if (buf != nullptr && len > 0) out.payload.assign(static_cast<const char*>(buf), len);
    std::free(buf);
    time_t t = 0;
    if (munge_ctx_get(c.ctx, MUNGE_OPT_ENCODE_TIME, &t) == EMUNGE_SUCCESS) out.encoded_at = t;
    return out;
  }

  std::string Describe() const override { return "MUNGE at " + socket_; }

 private:
  const std::string socket_;
};

}  // namespace

std::unique_ptr<CredentialCodec> MungeCodec(std::string socket) {
  return std::make_unique<Munge>(std::move(socket));
}

}  // namespace ltd::rdzv
