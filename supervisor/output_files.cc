#include "output_files.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "job_log.h"
#include "open_as_user.h"
#include "output_pattern.h"
#include "str_util.h"

namespace ltd {

absl::StatusOr<OutputFiles> OutputFiles::Open(const Job& job, bool truncate) {
  OutputFiles files;
  const int ranks = job.spec.devices;
  files.out_.resize(static_cast<size_t>(ranks));
  files.err_.resize(static_cast<size_t>(ranks));
  // Every path of every rank, each once, with the flag that named it.
  std::vector<std::pair<std::string, const char*>> paths;
  std::map<std::string, size_t> index;
  // No --error: stderr goes where stdout goes, as with sbatch.
  const std::string& error = job.spec.error.empty() ? job.spec.output : job.spec.error;
  for (auto [flag, pattern, targets] :
       {std::tuple{"--output", &job.spec.output, &files.out_},
        std::tuple{job.spec.error.empty() ? "--output" : "--error", &error, &files.err_}}) {
    if (pattern->empty()) continue;
    const bool shared = !PatternPerRank(*pattern) && ranks > 1;
    for (int r = 0; r < ranks; ++r) {
      Target& t = (*targets)[static_cast<size_t>(r)];
      const std::string path = ExpandOutputPattern(*pattern, job.id, r, job.spec.name);
      auto [it, fresh] = index.try_emplace(path, paths.size());
      if (fresh) paths.emplace_back(path, flag);
      t.file = it->second;
      t.prefixed = shared;
    }
  }
  // All opened on one thread as the user; what it opened is read only
  // once it has returned (a thread given up on keeps its own copy).
  struct Opened {
    std::vector<Fd> fds;
    std::string failed;  // "FLAG: why"
  };
  auto opened = std::make_shared<Opened>();
  absl::Status s = RunAsFileUser(job.spec.uid, job.spec.gid, [paths, truncate, opened] {
    for (const auto& [path, flag] : paths) {
      auto fd = OpenOutputFile(path, truncate);
      if (!fd.ok()) {
        opened->failed = Cat(flag, ": ", fd.status().message());
        return fd.status();
      }
      opened->fds.push_back(std::move(*fd));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) {
    if (s.code() == absl::StatusCode::kDeadlineExceeded || opened->failed.empty()) {
      return absl::Status(s.code(), Cat("--output ", paths.front().first, ": ", s.message()));
    }
    return absl::Status(s.code(), opened->failed);
  }
  auto writer = OutputWriter::Create();
  if (!writer.ok()) return writer.status();
  files.writer_ = std::move(*writer);
  for (size_t i = 0; i < paths.size(); ++i) {
    files.writer_->AddFile(std::move(opened->fds[i]), paths[i].first);
  }
  return files;
}

absl::Status OutputFiles::Check(const JobSpec& spec) {
  for (auto [flag, pattern] :
       {std::pair{"--output", &spec.output}, std::pair{"--error", &spec.error}}) {
    if (pattern->empty()) continue;
    const size_t slash = pattern->rfind('/');
    if (pattern->substr(0, slash).find('%') != std::string::npos) continue;
    const std::string base = pattern->substr(slash + 1);
    const bool dir_only = base.find("%j") != std::string::npos ||
                          (spec.name.empty() && base.find("%n") != std::string::npos);
    const std::string path = ExpandOutputPattern(*pattern, "", 0, spec.name);
    absl::Status s = RunAsFileUser(spec.uid, spec.gid,
                                   [path, dir_only] { return CheckOutputFile(path, dir_only); });
    if (s.code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::InvalidArgumentError(Cat(flag, " ", path, ": ", s.message()));
    }
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          Cat(flag, ": ", s.message(), "; give a file you may write"));
    }
  }
  return absl::OkStatus();
}

void OutputFiles::Write(int rank, Stream stream, std::string_view stored, size_t prefix_bytes) {
  auto& targets = stream == Stream::kStdout ? out_ : err_;
  if (rank < 0 || static_cast<size_t>(rank) >= targets.size()) return;
  const Target& t = targets[static_cast<size_t>(rank)];
  if (t.file == kNoFile || writer_ == nullptr) return;
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
  writer_->Queue(t.file, buf_);
}

}  // namespace ltd
