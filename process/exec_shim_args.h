// How lt-exec (exec_shim.cc) is told whom to become: the process layer's
// one place that builds its `--user` and `--groups` arguments.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

// The groups `uid` gets at login with primary group `gid` (getgrouplist,
// through NSS, so LDAP or sssd groups too); just `gid` when the uid has
// no passwd entry. Looked up here, in the caller, once per job attempt:
// lt-exec itself then runs no NSS at all, a quarter of its CPU (1.5 ms of
// some 5.5 ms per rank on the project's VM). None in a program linked
// statically (lt-shim, with shim/login_groups_none.cc): NSS in a static
// glibc loads a shared glibc beside its own (and crashed so in Debian 12's
// nss_systemd); such a program gets its users' groups from its caller.
std::optional<std::vector<gid_t>> LoginGroups(uid_t uid, gid_t gid);

// The fd lt-exec reads a rank's groups from when they come later
// (`--groups-fd`): above the spec (4) and the stack pipe (5).
constexpr int kGroupsFd = 6;

// A user's LoginGroups, looked up on a thread of its own: NSS may wait on
// a network (an LDAP or sssd server away) for as long as its timeout, and
// the loop that starts ranks must not. A rank that starts before the
// answer is in gets a socket instead, on which the lookup's thread writes
// the groups once NSS answers: lt-exec waits there, the loop never does,
// and lt-exec itself runs no NSS (it is linked statically, and glibc's NSS
// would load a second, shared glibc into it).
class GroupsLookup {
 public:
  using Lookup = std::function<std::optional<std::vector<gid_t>>(uid_t, gid_t)>;
  explicit GroupsLookup(Lookup lookup = LoginGroups) : lookup_(std::move(lookup)) {}

  // Looks up uid:gid's groups afresh (a new attempt, as at a new login):
  // an earlier answer is forgotten. While a lookup for uid:gid still runs,
  // its answer is awaited instead: one thread at most waits on a slow NSS.
  void Start(uid_t uid, gid_t gid);
  // uid:gid's groups are `groups`, as the job's submitter had them: no
  // lookup (one still running for them is forgotten).
  void Set(uid_t uid, gid_t gid, std::vector<gid_t> groups);
  // uid:gid's groups once the latest Start for them has its answer.
  std::optional<std::vector<gid_t>> Get(uid_t uid, gid_t gid) const;

  // What a rank about to start as uid:gid is given: `groups` when the
  // lookup has answered; else `later`, the read end of a socket on which
  // the lookup's thread writes them as `G,G,...` (nothing when the lookup
  // failed) and which it then closes. A failed lookup is tried again here,
  // once; an error when that fails too, or when no socket can be had.
  struct ForRank {
    std::optional<std::vector<gid_t>> groups;
    Fd later;
  };
  absl::StatusOr<ForRank> GroupsForRank(uid_t uid, gid_t gid);

 private:
  struct Answer {
    std::mutex mu;
    bool done = false;
    std::optional<std::vector<gid_t>> groups;  // none when the lookup failed
    std::vector<Fd> waiting;                   // GroupsForRank's sockets, until done
  };
  static void Deliver(Answer& answer, gid_t gid, std::optional<std::vector<gid_t>> groups);
  Lookup lookup_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::shared_ptr<Answer> answer_;  // of the latest Start; shared with its thread
};

// `--user UID:GID --groups G1,G2,...` appended to `argv` when the process
// must become uid:gid (a long list of groups as several --groups, each
// far below the kernel's limit on one argument); nothing when the caller
// already is that user. Without `groups` (nullptr), `--groups-fd 6`: they
// come on lt-exec's kGroupsFd (GroupsLookup::GroupsForRank's `later`).
void AppendUserArgs(uid_t uid, gid_t gid, const std::vector<gid_t>* groups,
                    std::vector<std::string>& argv);

}  // namespace ltd
