// How a process becomes a rank, in order: its groups read (when they come
// later), every fd but the rank's closed, its cgroups joined as root, the
// submitting user become, the submitter's limits set, death with the
// supervisor asked for, the working directory entered as the user, every
// signal the starter caught or ignored put back, and the program found in
// the user's PATH and executed (docs/design.md, "Starting a rank").
//
// Two callers run these steps. lt-exec, a process of its own, fills a
// RankStart from its arguments (exec_shim.cc). A supervisor's launcher runs
// them in a child that shares the supervisor's memory until its execve
// (RankChildMain; rank_clone.h), which saves a whole exec a rank. The
// supervisor's threads go on meanwhile, so the steps allocate nothing,
// take no lock and write nothing thread-local, errno included (they make
// their system calls themselves); this file and what it calls are built
// without sanitizer instrumentation (its fake stacks are per thread).
// Everything they read is made beforehand (RankStartPlan) and stays until
// the child is reaped.
//
// When a step fails the rank says why on the heartbeat fd (`exec_failed
// WHAT`) and on stderr, and exits 127 (no program) or 126, as a shell does.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <string_view>

namespace ltd {

// Fds a rank keeps: 0-2, 3 (heartbeats), 5 (the stack pipe). 4 held what to
// run (lt-exec's spec) and 6 the groups when they come later.
constexpr int kRankHeartbeatFd = 3;
constexpr int kRankStackFd = 5;
constexpr int kRankGroupsFd = 6;

// The groups as text, `G,G,...`: at most the kernel's limit of gids, each
// at most ten digits and a comma.
constexpr size_t kMaxGroups = 65536;  // NGROUPS_MAX
constexpr size_t kMaxGroupsText = kMaxGroups * 11;

struct RankLimit {
  int resource = 0;
  rlimit limit{};
};

struct RankStart {
  const char* const* cgroup_procs = nullptr;  // DIR/cgroup.procs of each cgroup to join
  size_t cgroup_count = 0;
  bool change_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;  // the user's groups as the caller looked them up
  size_t group_count = 0;
  // Or, when they come later: read as `G,G,...` from kRankGroupsFd to its
  // end, into these buffers (kMaxGroupsText and kMaxGroups long).
  bool groups_later = false;
  char* groups_text = nullptr;
  gid_t* groups_read = nullptr;
  const RankLimit* limits = nullptr;
  size_t limit_count = 0;
  pid_t parent = 0;  // when set, the rank exits 137 if that is no longer its parent
  const char* cwd = nullptr;
  char* const* argv = nullptr;
  // The environment: `env` as is without an automatic heartbeat request;
  // with one, `env_granted` or `env_dropped` by the program found
  // (auto_instrument.h).
  char* const* env = nullptr;
  char* const* env_granted = nullptr;
  char* const* env_dropped = nullptr;
  const char* path = nullptr;  // where to look for a program named without a slash
};

// Runs every step and execs; returns never.
[[noreturn]] void StartRank(const RankStart& start);

// What a failed step does: `exec_failed WHAT` on the heartbeat fd, `ltd:
// WHAT` on stderr, and exit `code`. (lt-exec's own argument errors too.)
[[noreturn]] void FailRankStart(int code, std::string_view what);

// The fds a launcher's child makes the rank's, each above 6
// (AboveSpawnFds). `groups` is -1 unless the groups come later.
struct RankFds {
  int stdout_fd = -1;
  int stderr_fd = -1;
  int heartbeat = -1;
  int stack = -1;
  int groups = -1;
};
struct RankChildArgs {
  RankFds fds;
  const RankStart* start = nullptr;
};
// The child's function for clone(2): puts `args->fds` in place (stdin
// becomes /dev/null), closes every other fd, starts a session, and runs
// StartRank(*args->start).
int RankChildMain(void* args);

// `G1,G2,...` (decimal gids) appended to `out`, which holds `*count` of
// `capacity`. kBad for anything else, kTooMany past the capacity.
enum class GroupListError { kNone, kBad, kTooMany };
GroupListError ParseGroupList(const char* text, size_t len, gid_t* out, size_t capacity,
                              size_t* count);

// True for a program that is Python (`python`, `python3`, `python3.11`,
// any directory), a script whose `#!` line names Python or a shell (also
// through `env`), or a shell or command wrapper that may start Python (sh,
// bash, dash, zsh, ksh, env, nice, nohup, numactl, taskset, stdbuf,
// timeout, chrt, ionice, setsid). `head` is the start of the file (its
// first line is enough); empty when it could not be read.
bool MayRunPython(std::string_view path, std::string_view head);

}  // namespace ltd
