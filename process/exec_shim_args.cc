#include "exec_shim_args.h"

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <thread>

#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

std::vector<gid_t> LoginGroups(uid_t uid, gid_t gid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  while (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1u << 22))
    buf.resize(buf.size() * 2);
  if (found == nullptr) return {gid};
  std::vector<gid_t> groups(64);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(pw.pw_name, gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    // More than fit: as initgroups does, at most the kernel's limit (the
    // first ones, which getgrouplist has filled in).
    if (groups.size() >= NGROUPS_MAX) return groups;
    groups.resize(std::min<size_t>(
        std::max<size_t>(static_cast<size_t>(std::max(n, 0)), groups.size() * 2), NGROUPS_MAX));
  }
}

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
        // Out of memory, say: lt-exec looks them up, rank by rank.
      }
      const std::lock_guard<std::mutex> lock(answer->mu);
      answer->done = true;
      answer->groups = std::move(groups);
    }).detach();
  } catch (const std::system_error& e) {
    // No thread to be had: lt-exec looks the groups up, rank by rank.
    spdlog::warn("cannot look up the groups of uid {} ahead: {}", uid, e.what());
  }
}

std::optional<std::vector<gid_t>> GroupsLookup::Get(uid_t uid, gid_t gid) const {
  if (answer_ == nullptr || uid != uid_ || gid != gid_) return std::nullopt;
  const std::lock_guard<std::mutex> lock(answer_->mu);
  return answer_->groups;
}

void AppendUserArgs(uid_t uid, gid_t gid, const std::vector<gid_t>* groups,
                    std::vector<std::string>& argv) {
  if (uid == geteuid() && gid == getegid()) return;
  argv.push_back("--user");
  argv.push_back(Cat(uid, ":", gid));
  if (groups == nullptr) return;
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
