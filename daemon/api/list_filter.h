// Which jobs `ps` lists: ListRequest's filters (--me, --user, --state, -a)
// checked once at the RPC edge, then matched against each job on the loop.
#pragma once

#include <sys/types.h>

#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "job.h"
#include "ltd.pb.h"

namespace ltd {

struct ListFilter {
  bool all = false;                      // finished jobs too (when no states are given)
  std::optional<uid_t> owner;            // --me: the caller's uid
  std::optional<std::set<uid_t>> users;  // --user: these uids only
  std::set<JobState> states;             // --state: these only, finished or not

  bool Matches(const Job& job) const;
};

// The request's filters; a user unknown on this host or a state that is
// none is an InvalidArgument saying which. `caller` is who the kernel
// says is calling. Looks users up (NSS): call it off the loop.
absl::StatusOr<ListFilter> FilterFromRequest(const v1::ListRequest& req, uid_t caller);

}  // namespace ltd
