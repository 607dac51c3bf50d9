#include "output_files.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "job_log.h"
#include "output_pattern.h"
#include "str_util.h"

namespace ltd {
namespace {

// `s` of the helper, in one line that names the flag (and the file):
// "--output PATH is on procfs; give ...", "--output: open(PATH): ...".
// `remedy` follows a failed call's words.
absl::Status FlagError(const absl::Status& s, const UserFileFailure& failure,
                       const std::vector<std::pair<std::string, const char*>>& paths,
                       std::string_view remedy) {
  if (failure.file < paths.size()) {
    const char* flag = paths[failure.file].second;
    return failure.refused ? absl::Status(s.code(), Cat(flag, " ", s.message()))
                           : absl::Status(s.code(), Cat(flag, ": ", s.message(), remedy));
  }
  // Not one file's fault: the file system did not answer, too many wait.
  return absl::Status(s.code(),
                      Cat(paths.front().second, " ", paths.front().first, ": ", s.message()));
}

// This host's name, as %N gives it ("" when it has none).
std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

// What a path's check can fill in before the job has an id or a node.
PatternValues NameOnly(std::string_view name) {
  PatternValues v;
  v.name = name;
  return v;
}

}  // namespace

absl::StatusOr<OutputFiles> OutputFiles::Open(const Job& job, bool truncate, UserFiles* user) {
  OutputFiles files;
  const int ranks = job.spec.devices;
  files.out_.resize(static_cast<size_t>(ranks));
  files.err_.resize(static_cast<size_t>(ranks));
  // Every path of every rank, each once, with the flag that named it.
  std::vector<std::pair<std::string, const char*>> paths;
  std::map<std::string, size_t> index;
  // No --error: stderr goes where stdout goes, as with sbatch.
  const std::string& error = job.spec.error.empty() ? job.spec.output : job.spec.error;
  const std::string host = HostName();
  for (auto [flag, pattern, targets] :
       {std::tuple{"--output", &job.spec.output, &files.out_},
        std::tuple{job.spec.error.empty() ? "--output" : "--error", &error, &files.err_}}) {
    if (pattern->empty()) continue;
    // A record's pattern, checked at submit, is still a record's bytes.
    auto parsed = ParseOutputPattern(flag, *pattern, job.spec.output_patterns);
    if (!parsed.ok()) return parsed.status();
    const bool shared = !PatternPerRank(*parsed) && ranks > 1;
    PatternValues values;
    values.job_id = job.id;
    values.name = job.spec.name;
    values.node = std::max(0, NodeRankOf(job.spec.nodes));
    values.host = host;
    values.user = job.user;
    const std::string task = std::to_string(job.spec.array.task);
    if (!job.spec.array.job_id.empty()) {
      values.array_job_id = job.spec.array.job_id;
      values.array_task_id = task;
    }
    for (int r = 0; r < ranks; ++r) {
      Target& t = (*targets)[static_cast<size_t>(r)];
      values.local_rank = r;
      values.rank = values.node * ranks + r;
      const std::string path = ExpandOutputPattern(*parsed, values);
      auto [it, fresh] = index.try_emplace(path, paths.size());
      if (fresh) paths.emplace_back(path, flag);
      t.file = it->second;
      t.prefixed = shared;
    }
  }
  if (user == nullptr) {
    return absl::FailedPreconditionError(
        Cat(paths.front().second, ": this supervisor cannot open files as the job's user"));
  }
  std::vector<std::string> names;
  for (const auto& [path, flag] : paths) names.push_back(path);
  UserFileFailure failure;
  auto sink = user->Open(Credentials{job.spec.uid, job.spec.gid, job.spec.groups}, names, truncate,
                         job.spec.umask, &failure);
  if (!sink.ok()) return FlagError(sink.status(), failure, paths, "");
  auto writer = OutputWriter::Create(std::move(*sink), std::move(names));
  if (!writer.ok()) return writer.status();
  files.writer_ = std::move(*writer);
  return files;
}

namespace {

// The files of `spec` whose place is known before the job has an id, each
// with the flag that named it; an error where a pattern does not parse.
absl::StatusOr<std::vector<std::pair<UserFile, const char*>>> CheckedFiles(const JobSpec& spec) {
  std::vector<std::pair<UserFile, const char*>> files;
  for (auto [flag, pattern] :
       {std::pair{"--output", &spec.output}, std::pair{"--error", &spec.error}}) {
    if (pattern->empty()) continue;
    const size_t slash = pattern->rfind('/');
    if (pattern->substr(0, slash).find('%') != std::string::npos) continue;
    auto base = ParseOutputPattern(flag, pattern->substr(slash + 1), spec.output_patterns);
    auto parsed = ParseOutputPattern(flag, *pattern, spec.output_patterns);
    if (!base.ok() || !parsed.ok()) return parsed.ok() ? base.status() : parsed.status();
    const bool dir_only = PatternNeedsJob(*base, !spec.name.empty());
    files.emplace_back(UserFile{ExpandOutputPattern(*parsed, NameOnly(spec.name)), dir_only}, flag);
  }
  return files;
}

}  // namespace

bool OutputFiles::NeedsCheck(const JobSpec& spec) {
  auto files = CheckedFiles(spec);
  // A pattern that does not parse is refused by Check, which says why.
  return !files.ok() || !files->empty();
}

absl::Status OutputFiles::Check(const JobSpec& spec, UserFiles& user) {
  auto checked = CheckedFiles(spec);
  if (!checked.ok()) return checked.status();
  std::vector<std::pair<std::string, const char*>> paths;
  std::vector<UserFile> files;
  for (auto& [file, flag] : *checked) {
    paths.emplace_back(file.path, flag);
    files.push_back(std::move(file));
  }
  if (files.empty()) return absl::OkStatus();
  UserFileFailure failure;
  absl::Status s = user.Check(Credentials{spec.uid, spec.gid, spec.groups}, files, &failure);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(
      FlagError(s, failure, paths, "; give a file you may write").message());
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
