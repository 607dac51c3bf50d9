// The finished jobs the job table keeps (their records and logs in the
// state dir), per user, oldest first, with what each takes on disk; and
// which of them goes first when a bound is passed (--keep-jobs,
// --max-state-bytes).
//
// Both bounds are shared per user: every user with a record in the state
// dir (a live job or a finished one) has an equal share, the bound divided
// by the number of such users. When the bound is passed, the user furthest
// over their share loses their oldest finished job first; a user within
// their share loses none, so one user's volume never erases another's
// records. Live jobs are never pruned: a user whose live jobs keep the
// state dir past its bound is the one refused at submit (ShareOf).
//
// Bookkeeping only (no disk, no clock): the job table feeds it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ltd {

class FinishedJobs {
 public:
  // Bytes per user of the jobs still live (PENDING, RUNNING): theirs count
  // in the bound and make them users with a share.
  using Usage = std::map<uid_t, uint64_t>;

  // A job ended (or a recovered one): the newest of its user's.
  void Add(const std::string& id, uid_t uid, uint64_t bytes);
  // A recovered table's jobs: oldest is the smallest id.
  void SortById();
  void Remove(const std::string& id);
  // What a kept job takes, measured after it was added (a restart counts
  // its kept jobs first and measures their dirs while it serves).
  void SetBytes(const std::string& id, uint64_t bytes);

  size_t size() const { return owner_.size(); }
  uint64_t bytes() const { return bytes_; }

  // The next job to remove so that at most `keep` are kept and, with
  // `max_bytes` > 0, these and the live ones take at most `max_bytes`;
  // nullopt when none must go, or no user over their share has one.
  std::optional<std::string> NextToPrune(size_t keep, uint64_t max_bytes, const Usage& live) const;

  // One user's part of `max_bytes`, as a submit of theirs sees it.
  struct Share {
    uint64_t total = 0;  // what every user's jobs take
    uint64_t used = 0;   // what the user's take (live ones in `live_used`)
    uint64_t live_used = 0;
    uint64_t share = 0;  // max_bytes / users
    size_t users = 0;    // users with records, the user counted
  };
  Share ShareOf(uid_t uid, uint64_t max_bytes, const Usage& live) const;

 private:
  struct Entry {
    std::string id;
    uint64_t bytes = 0;
    uint64_t seq = 0;  // the order jobs ended in, over all users
  };
  struct User {
    std::deque<Entry> jobs;  // oldest first
    uint64_t bytes = 0;
  };
  // Users with records: those with finished jobs and those in `live`.
  size_t Users(const Usage& live, std::optional<uid_t> also = std::nullopt) const;

  std::map<uid_t, User> users_;
  struct Owner {
    uid_t uid;
    uint64_t seq;  // its Entry's: a user's entries are in seq order
  };
  std::map<std::string, Owner, std::less<>> owner_;
  // Job `id`'s user and entry (owner `o`); {nullptr, {}} when it has none.
  std::pair<User*, std::deque<Entry>::iterator> Find(const Owner& o, std::string_view id);
  uint64_t bytes_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace ltd
