#include "etcd_security.h"

#include "file_io.h"
#include "private_file.h"

namespace ltd::rdzv {

absl::StatusOr<etcd::Security> LoadSecurity(const EtcdFiles& files, bool tls) {
  etcd::Security sec;
  sec.tls = tls;
  if (!tls && (!files.ca.empty() || !files.cert.empty() || !files.key.empty())) {
    return absl::InvalidArgumentError(
        "--etcd-ca, --etcd-cert and --etcd-key are for etcd over TLS; give --rdzv "
        "etcds://HOST:PORT");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--etcd-cert and --etcd-key go together; give both or none");
  }
  constexpr size_t kMaxPem = 1 << 20;
  if (!files.ca.empty()) {
    auto ca = ReadWholeFile(files.ca, kMaxPem);
    if (!ca.ok()) return absl::NotFoundError("--etcd-ca " + files.ca + ": cannot be read");
    sec.ca_pem = std::move(*ca);
  }
  if (!files.cert.empty()) {
    auto cert = ReadWholeFile(files.cert, kMaxPem);
    if (!cert.ok()) return absl::NotFoundError("--etcd-cert " + files.cert + ": cannot be read");
    sec.cert_pem = std::move(*cert);
    auto key = ReadPrivateFile("--etcd-key", files.key);
    if (!key.ok()) return key.status();
    sec.key_pem = std::move(*key);
  }
  if (!files.auth_file.empty()) {
    auto text = ReadPrivateFile("--etcd-auth-file", files.auth_file);
    if (!text.ok()) return text.status();
    std::string line = text->substr(0, text->find('\n'));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError("--etcd-auth-file " + files.auth_file +
                                        " does not hold USER:PASSWORD on its first line");
    }
    sec.user = line.substr(0, colon);
    sec.password = line.substr(colon + 1);
  }
  return sec;
}

}  // namespace ltd::rdzv
