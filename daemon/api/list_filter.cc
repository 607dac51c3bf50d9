#include "list_filter.h"

#include <pwd.h>

#include <charconv>
#include <string>
#include <vector>

#include "bytes.h"
#include "str_util.h"

namespace ltd {
namespace {

// A user name or a numeric uid, as `squeue -u` takes it.
absl::StatusOr<uid_t> ResolveUser(const std::string& who) {
  if (who.empty()) return absl::InvalidArgumentError("--user is empty; give a user name or uid");
  uid_t uid = 0;
  const char* end = who.data() + who.size();
  if (auto [p, ec] = std::from_chars(who.data(), end, uid); ec == std::errc() && p == end) {
    return uid;
  }
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (who.find('\0') == std::string::npos &&
      getpwnam_r(who.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_uid;
  }
  return absl::InvalidArgumentError(Cat("--user '", DisplayEscape(who, Controls::kEscape),
                                        "': no such user on this host; give a user name or uid"));
}

}  // namespace

bool ListFilter::Matches(const Job& job) const {
  if (owner && job.spec.uid != *owner) return false;
  if (users && !users->contains(job.spec.uid)) return false;
  if (!states.empty()) return states.contains(job.state);
  return all || !IsFinal(job.state);
}

absl::StatusOr<ListFilter> FilterFromRequest(const v1::ListRequest& req, uid_t caller) {
  ListFilter f;
  f.all = req.all();
  if (req.me()) f.owner = caller;
  if (req.users_size() > 0) {
    constexpr int kMaxUsers = 1000;
    if (req.users_size() > kMaxUsers) {
      return absl::InvalidArgumentError(
          Cat("--user given ", req.users_size(), " times; at most ", kMaxUsers));
    }
    f.users.emplace();
    for (const std::string& who : req.users()) {
      auto uid = ResolveUser(who);
      if (!uid.ok()) return uid.status();
      f.users->insert(*uid);
    }
  }
  for (int s : req.states()) {
    const auto state = v1::Job::State_IsValid(s) && s != v1::Job::STATE_UNSPECIFIED
                           ? ParseJobState(v1::Job::State_Name(static_cast<v1::Job::State>(s)))
                           : std::nullopt;
    if (!state) {
      return absl::InvalidArgumentError(
          Cat("--state ", s,
              " is no job state; use PENDING, STARTING, RUNNING, SUCCEEDED, FAILED, "
              "CANCELLED or LOST"));
    }
    f.states.insert(*state);
  }
  return f;
}

}  // namespace ltd
