#include "output_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <tuple>

#include "bytes.h"
#include "job_log.h"
#include "open_as_user.h"
#include "output_pattern.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

absl::StatusOr<OutputFiles> OutputFiles::Open(const Job& job, bool truncate) {
  OutputFiles files;
  const int ranks = job.spec.devices;
  files.out_.resize(static_cast<size_t>(ranks));
  files.err_.resize(static_cast<size_t>(ranks));
  const FileUser user = FileUserOf(job.spec.uid, job.spec.gid);
  std::map<std::string, std::shared_ptr<Fd>> opened;  // one fd per path
  // No --error: stderr goes where stdout goes, as with sbatch.
  const std::string& error = job.spec.error.empty() ? job.spec.output : job.spec.error;
  for (auto [flag, pattern, targets] :
       {std::tuple{"--output", &job.spec.output, &files.out_},
        std::tuple{job.spec.error.empty() ? "--output" : "--error", &error, &files.err_}}) {
    if (pattern->empty()) continue;
    const bool shared = !PatternPerRank(*pattern) && ranks > 1;
    for (int r = 0; r < ranks; ++r) {
      Target& t = (*targets)[static_cast<size_t>(r)];
      t.path = ExpandOutputPattern(*pattern, job.id, r, job.spec.name);
      t.prefixed = shared;
      auto& fd = opened[t.path];
      if (fd == nullptr) {
        auto file = OpenOutputAsUser(t.path, user, truncate);
        if (!file.ok()) return absl::Status(file.status().code(), Cat(flag, ": ", file.status().message()));
        fd = std::make_shared<Fd>(std::move(*file));
      }
      t.fd = fd;
    }
  }
  return files;
}

absl::Status OutputFiles::Check(const JobSpec& spec) {
  std::optional<FileUser> user;
  for (auto [flag, pattern] :
       {std::pair{"--output", &spec.output}, std::pair{"--error", &spec.error}}) {
    if (pattern->empty()) continue;
    const size_t slash = pattern->rfind('/');
    if (pattern->substr(0, slash).find('%') != std::string::npos) continue;
    const std::string base = pattern->substr(slash + 1);
    const bool dir_only = base.find("%j") != std::string::npos ||
                          (spec.name.empty() && base.find("%n") != std::string::npos);
    if (!user) user = FileUserOf(spec.uid, spec.gid);
    const std::string path = ExpandOutputPattern(*pattern, "", 0, spec.name);
    if (auto s = CheckOutputAsUser(path, *user, dir_only); !s.ok()) {
      return absl::InvalidArgumentError(Cat(flag, ": ", s.message(), "; give a file you may write"));
    }
  }
  return absl::OkStatus();
}

void OutputFiles::Write(int rank, Stream stream, std::string_view stored, size_t prefix_bytes) {
  auto& targets = stream == Stream::kStdout ? out_ : err_;
  if (rank < 0 || static_cast<size_t>(rank) >= targets.size()) return;
  Target& t = targets[static_cast<size_t>(rank)];
  if (t.fd == nullptr || t.failed) return;
  // The log's stamp off each line; its "[R] " too unless ranks share the file.
  const size_t drop = t.prefixed ? std::min(prefix_bytes, kLogStampBytes) : prefix_bytes;
  buf_.clear();
  for (size_t at = 0; at < stored.size();) {
    size_t end = stored.find('\n', at);
    if (end == std::string_view::npos) end = stored.size();
    const size_t from = std::min(at + drop, end);
    buf_.append(stored.substr(from, end - from)).push_back('\n');
    at = end + 1;
  }
  std::string_view data(buf_);
  while (!data.empty()) {
    const ssize_t n = write(t.fd->get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      t.failed = true;
      spdlog::warn("rank={} output to {} stopped: write: {}", rank, ForLog(t.path),
                   n < 0 ? std::strerror(errno) : "wrote nothing");
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace ltd
