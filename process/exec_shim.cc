// lt-exec: a rank's start as a program of its own, for a starter that
// cannot run rank_start.h's steps in a child of its own (gdb as a rank's
// user, for its stacks; a supervisor on an architecture without
// RankChild, or with fs.suid_dumpable 1: rank_clone.h). Started with
// posix_spawn, it takes the steps and execs the program in the same pid:
//
//   lt-exec [--cgroup DIR]... [--user UID:GID (--groups GID,...)... | --groups-fd 6]
//           [--rlimit R:SOFT:HARD]... [--parent PID]
//
// It runs as root with an empty environment, so nothing the user controls
// reaches code with more privilege than the user: glibc reads its own
// variables (GLIBC_TUNABLES; LD_* in a sanitized build, linked shared)
// before main(), and the user's environment is not lt-exec's. What to
// run comes on fd 4 (a memfd ltd wrote), never in argv or environ:
//
//   CWD \0 ARGC \0 ARGV[0] \0 ... ENVC \0 ENV[0] \0 ...
//
// The user's groups are as the caller looked them up (`--groups`, or, when
// its lookup had not answered yet, `G,G,...` on fd 6 once it has:
// `--groups-fd 6`). lt-exec runs no NSS: it is linked statically (a
// rank's start costs a quarter less CPU), and glibc's NSS would load a
// second, shared glibc into it.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rank_start.h"
#include "rank_start_plan.h"

namespace {

constexpr int kSpecFd = 4;  // exec_spec.h
// argv and environ together cannot exceed what execve takes; this bounds
// what lt-exec reads whatever fd 4 holds.
constexpr size_t kMaxSpec = 64u << 20;

[[noreturn]] void Fail(int code, const std::string& what) { ltd::FailRankStart(code, what); }

// All of `fd` up to its end, then closed; past `max` bytes, or when it
// cannot be read, lt-exec fails saying `too_large` or what it read (`what`).
std::string ReadToEnd(int fd, size_t max, const char* too_large, const char* what) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > max) Fail(126, too_large);
      continue;
    }
    if (n == 0) break;
    if (errno != EINTR) Fail(126, std::string("cannot read ") + what + ": " + std::strerror(errno));
  }
  close(fd);
  return text;
}

ltd::RankStartPlan::What ReadSpec() {
  const std::string raw = ReadToEnd(
      kSpecFd, kMaxSpec, "the program's arguments and environment are too large", "what to run");
  size_t at = 0;
  auto next = [&]() -> std::string {
    const size_t end = raw.find('\0', at);
    if (end == std::string::npos) Fail(126, "what to run is garbled; this is a bug of ltd");
    std::string field = raw.substr(at, end - at);
    at = end + 1;
    return field;
  };
  auto count = [&]() -> size_t {
    const std::string n = next();
    char* end = nullptr;
    const unsigned long v = std::strtoul(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v > raw.size()) Fail(126, "what to run is garbled");
    return v;
  };
  ltd::RankStartPlan::What what;
  what.cwd = next();
  for (size_t i = count(); i > 0; --i) what.argv.push_back(next());
  for (size_t i = count(); i > 0; --i) what.env.push_back(next());
  return what;
}

// `--groups G1,G2,...`: added to `groups` (a long list comes in several),
// at most the kernel's limit in all.
void ParseGroups(const char* list, std::vector<gid_t>& groups) {
  const size_t len = std::strlen(list);
  size_t count = groups.size();
  groups.resize(std::min(ltd::kMaxGroups, count + std::count(list, list + len, ',') + 1));
  const ltd::GroupListError error =
      ltd::ParseGroupList(list, len, groups.data(), groups.size(), &count);
  groups.resize(count);
  if (error == ltd::GroupListError::kTooMany) Fail(126, "more groups than the kernel takes");
  if (error == ltd::GroupListError::kBad) Fail(126, "--groups takes GID,GID,...");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> cgroups;
  pid_t parent = 0;
  std::optional<ltd::RankStartPlan::User> user;
  std::vector<gid_t> groups;
  bool groups_later = false;
  std::vector<ltd::RankLimit> limits;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cgroup") == 0 && i + 1 < argc) {
      cgroups.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
      unsigned long u = 0, g = 0;
      if (std::sscanf(argv[++i], "%lu:%lu", &u, &g) != 2) Fail(126, "--user takes UID:GID");
      user.emplace();
      user->uid = static_cast<uid_t>(u);
      user->gid = static_cast<gid_t>(g);
    } else if (std::strcmp(argv[i], "--groups") == 0 && i + 1 < argc) {
      ParseGroups(argv[++i], groups);
    } else if (std::strcmp(argv[i], "--groups-fd") == 0 && i + 1 < argc) {
      if (std::strcmp(argv[++i], "6") != 0) Fail(126, "--groups-fd takes 6");
      groups_later = true;
    } else if (std::strcmp(argv[i], "--rlimit") == 0 && i + 1 < argc) {
      // RESOURCE:SOFT:HARD, the submitter's as ltd passes them on.
      int resource = -1;
      unsigned long long soft = 0, hard = 0;
      if (std::sscanf(argv[++i], "%d:%llu:%llu", &resource, &soft, &hard) != 3 || soft > hard) {
        Fail(126, "--rlimit takes RESOURCE:SOFT:HARD");
      }
      limits.push_back({resource, rlimit{soft, hard}});
    } else if (std::strcmp(argv[i], "--parent") == 0 && i + 1 < argc) {
      parent = static_cast<pid_t>(std::strtol(argv[++i], nullptr, 10));
    } else {
      Fail(126, std::string("unknown argument ") + argv[i]);
    }
  }
  ltd::RankStartPlan::What what = ReadSpec();
  if (user) {
    user->groups = std::move(groups);
    user->later = groups_later && user->groups.empty();
  }
  const ltd::RankStartPlan plan(cgroups, std::move(user), std::move(limits), parent,
                                std::move(what));
  ltd::StartRank(plan.start());
}
