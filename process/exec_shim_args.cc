#include "exec_shim_args.h"

#include <limits.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <thread>

#include "posix_error.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

void GroupsLookup::Start(uid_t uid, gid_t gid) {
  if (answer_ != nullptr && uid == uid_ && gid == gid_) {
    const std::lock_guard<std::mutex> lock(answer_->mu);
    if (!answer_->done) return;  // still looking
  }
  uid_ = uid;
  gid_ = gid;
  answer_ = std::make_shared<Answer>();
  try {
    std::thread([answer = answer_, lookup = lookup_, uid, gid] {
      std::optional<std::vector<gid_t>> groups;
      try {
        groups = lookup(uid, gid);
      } catch (const std::exception&) {
        // Out of memory, say: the ranks waiting are told; the next asks again.
      }
      Deliver(*answer, gid, std::move(groups));
    }).detach();
  } catch (const std::system_error& e) {
    spdlog::warn("cannot look up the groups of uid {}: no thread for it ({})", uid, e.what());
    Deliver(*answer_, gid, std::nullopt);
  }
}

void GroupsLookup::Set(uid_t uid, gid_t gid, std::vector<gid_t> groups) {
  uid_ = uid;
  gid_ = gid;
  answer_ = std::make_shared<Answer>();
  Deliver(*answer_, gid, std::move(groups));
}

void GroupsLookup::Deliver(Answer& answer, gid_t gid, std::optional<std::vector<gid_t>> groups) {
  std::vector<Fd> waiting;
  std::string text;
  {
    const std::lock_guard<std::mutex> lock(answer.mu);
    answer.done = true;
    answer.groups = std::move(groups);
    waiting.swap(answer.waiting);
    if (answer.groups) {
      // As AppendUserArgs: an empty list is the primary group alone.
      for (gid_t g : answer.groups->empty() ? std::vector<gid_t>{gid} : *answer.groups) {
        if (!text.empty()) text.push_back(',');
        text += std::to_string(g);
      }
    }
  }
  // Each socket's lt-exec reads as it is written; one that died makes the
  // send fail at once, and none may hold this thread past its timeout.
  for (Fd& fd : waiting) {
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = send(fd.get(), text.data() + at, text.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
  }
}

std::optional<std::vector<gid_t>> GroupsLookup::Get(uid_t uid, gid_t gid) const {
  if (answer_ == nullptr || uid != uid_ || gid != gid_) return std::nullopt;
  const std::lock_guard<std::mutex> lock(answer_->mu);
  return answer_->groups;
}

absl::StatusOr<GroupsLookup::ForRank> GroupsLookup::GroupsForRank(uid_t uid, gid_t gid) {
  if (answer_ == nullptr || uid != uid_ || gid != gid_) Start(uid, gid);
  for (int tries = 0;; ++tries) {
    const std::shared_ptr<Answer> answer = answer_;
    std::unique_lock<std::mutex> lock(answer->mu);
    if (!answer->done) {
      int fds[2];
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        return PosixError("socketpair", Cat("the groups of uid ", uid), errno);
      }
      Fd ours(fds[0]), theirs(fds[1]);
      const timeval deadline{.tv_sec = 10, .tv_usec = 0};
      (void)setsockopt(ours.get(), SOL_SOCKET, SO_SNDTIMEO, &deadline, sizeof deadline);
      shutdown(theirs.get(), SHUT_WR);
      answer->waiting.push_back(std::move(ours));
      return ForRank{std::nullopt, std::move(theirs)};
    }
    if (answer->groups) return ForRank{answer->groups, Fd()};
    lock.unlock();
    if (tries > 0) {
      return absl::UnavailableError(
          Cat("cannot look up the groups of uid ", uid, " (see the supervisor's log)"));
    }
    Start(uid, gid);  // the last lookup failed: once more
  }
}

void AppendUserArgs(uid_t uid, gid_t gid, const std::vector<gid_t>* groups,
                    std::vector<std::string>& argv) {
  if (uid == geteuid() && gid == getegid()) return;
  argv.push_back("--user");
  argv.push_back(Cat(uid, ":", gid));
  if (groups == nullptr) {
    argv.push_back("--groups-fd");
    argv.push_back(std::to_string(kGroupsFd));
    return;
  }
  // One argument may hold at most 128 KiB (MAX_ARG_STRLEN): the groups go
  // in chunks that stay well below it, which lt-exec puts together.
  constexpr size_t kPerArg = 4096;
  const std::vector<gid_t> just_gid = {gid};
  const std::vector<gid_t>& all = groups->empty() ? just_gid : *groups;
  for (size_t at = 0; at < all.size(); at += kPerArg) {
    std::string list;
    for (size_t i = at; i < std::min(all.size(), at + kPerArg); ++i) {
      if (!list.empty()) list.push_back(',');
      list += std::to_string(all[i]);
    }
    argv.push_back("--groups");
    argv.push_back(std::move(list));
  }
}

}  // namespace ltd
