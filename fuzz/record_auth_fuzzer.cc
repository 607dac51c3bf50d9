// A multi-node run's etcd records under MUNGE (rdzv/record_auth.h): any
// user with the MUNGE key's hosts can mint a credential of their own uid
// over any payload and put it at any key, so the payload is hostile; only
// its writer's uid is MUNGE's word. A fake codec stands in for munged: the
// input picks the writer's uid and the bytes. Invariants: a record is
// believed only when its writer is the owner or root and its payload is
// exactly the frame of this key and the owner's uid (so it cannot be moved
// to another key, node or run); a refusal is counted once per key and
// revision, and said in one bounded line; what this node seals opens.
#include <memory>
#include <string>

#include "fuzz_check.h"
#include "record_auth.h"

using namespace ltd;
using namespace ltd::rdzv;

namespace {

constexpr uid_t kOwner = 1000;

// "MUNGE:<payload>" decodes to that payload as made by `writer`; anything
// else does not decode. Encoding makes the same, as `writer`.
class FakeCodec : public CredentialCodec {
 public:
  explicit FakeCodec(uid_t writer) : writer_(writer) {}
  absl::StatusOr<std::string> Encode(std::string_view payload) override {
    return "MUNGE:" + std::string(payload);
  }
  absl::StatusOr<Credential> Decode(std::string_view credential) override {
    if (!credential.starts_with("MUNGE:")) return absl::PermissionDeniedError("not a credential");
    Credential c;
    c.uid = writer_;
    c.payload = std::string(credential.substr(6));
    return c;
  }
  std::string Describe() const override { return "a fake MUNGE"; }

 private:
  const uid_t writer_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t pick = in.Byte();
  const uid_t writer = pick % 3 == 0 ? kOwner : pick % 3 == 1 ? 0 : 2000 + pick;
  etcd::KeyValue kv;
  kv.key = std::string(in.Field('\n'));
  kv.mod_revision = in.Byte();
  kv.value = std::string(in.Rest());

  RecordAuth auth(std::make_unique<FakeCodec>(writer), kOwner);
  int told = 0;
  std::string line;
  auth.OnRefused([&](int64_t total, const std::string& l, bool) {
    ++told;
    FUZZ_CHECK(total == told);
    line = l;
  });
  const std::optional<std::string> value = auth.Open(kv);
  if (value) {
    FUZZ_CHECK(writer == kOwner || writer == 0);
    FUZZ_CHECK(kv.value == "MUNGE:" + RecordAuth::Frame(kOwner, kv.key, *value));
    FUZZ_CHECK(auth.refused() == 0 && told == 0);
  } else {
    FUZZ_CHECK(auth.refused() == 1 && told == 1);
    FUZZ_CHECK(fuzz::IsOneLine(auth.last_refused(), 1024));
    FUZZ_CHECK(line == auth.last_refused());
  }
  // The same key and revision read again: the same answer, counted once.
  FUZZ_CHECK(auth.Open(kv) == value);
  FUZZ_CHECK(auth.refused() == (value ? 0 : 1));

  // What this node seals, its own record, opens as it was.
  if (writer == kOwner && kv.key.find('\n') == std::string::npos) {
    const auto sealed = auth.Seal(kv.key, kv.value);
    FUZZ_CHECK(sealed.ok());
    etcd::KeyValue mine{kv.key, *sealed, 0, kv.mod_revision + 1000, 0};
    FUZZ_CHECK(auth.Open(mine) == kv.value);
  }
  return 0;
}
