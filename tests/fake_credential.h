// A CredentialCodec without munged, for the rendezvous and fence logic: a
// "credential" is MUNGE:FAKE:<uid>:<payload>, made as `uid` (the user the
// test pretends this process runs as). One that does not parse, or says
// "MUNGE:FAKE:expired:", does not hold. Decodes are counted.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "credential.h"

namespace ltd::test {

class FakeCodec final : public rdzv::CredentialCodec {
 public:
  explicit FakeCodec(uid_t uid, std::shared_ptr<std::atomic<int>> decodes = nullptr)
      : uid_(uid), decodes_(std::move(decodes)) {}

  static std::string Make(uid_t uid, const std::string& payload) {
    return "MUNGE:FAKE:" + std::to_string(uid) + ":" + payload;
  }

  absl::StatusOr<std::string> Encode(std::string_view payload) override {
    return Make(uid_, std::string(payload));
  }
  absl::StatusOr<rdzv::Credential> Decode(std::string_view credential) override {
    if (decodes_) ++*decodes_;
    const std::string head = "MUNGE:FAKE:";
    const std::string c(credential);
    const size_t colon = c.find(':', head.size());
    if (c.rfind(head, 0) != 0 || colon == std::string::npos) {
      return absl::PermissionDeniedError("its credential does not hold");
    }
    const std::string uid = c.substr(head.size(), colon - head.size());
    if (uid == "expired") return absl::PermissionDeniedError("its credential has expired");
    if (uid.empty() || uid.find_first_not_of("0123456789") != std::string::npos) {
      return absl::PermissionDeniedError("its credential does not hold");
    }
    rdzv::Credential out;
    out.uid = static_cast<uid_t>(std::stoul(uid));
    out.payload = c.substr(colon + 1);
    return out;
  }
  std::string Describe() const override { return "fake MUNGE"; }

 private:
  const uid_t uid_;
  std::shared_ptr<std::atomic<int>> decodes_;
};

}  // namespace ltd::test
