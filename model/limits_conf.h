// limits.conf as pam_limits reads it (limits.conf(5)): a user's resource
// limits from /etc/security/limits.conf and limits.d/*.conf, so that a
// job's ranks run with what the admin set for its user whatever the client
// sends (admin_limits.h reads the files; this is the pure part, so that a
// fuzzer can call it alone: fuzz/limits_conf_fuzz.cc).
//
// What pam_limits does, and so what this does:
// - a line is `<domain> <type> <item> <value>`; `#` starts a comment;
//   type and item are case-insensitive; a line that is not four fields is
//   skipped (pam_limits logs it), as is an unknown type or item;
// - type `soft`, `hard`, or `-` for both; value a number, or `-1`,
//   `unlimited` or `infinity` for none; sizes (as core data fsize memlock
//   rss stack) in KiB, cpu in minutes;
// - domain: a user name; `@group` (the user's primary or supplementary
//   groups); `*`; a uid range `MIN:MAX` (`:N` is exactly N, `MIN:` from
//   MIN up); a gid range `@MIN:MAX` (an exact one looks at every group of
//   the user, a range at the primary one only); `%...` is for maxlogins,
//   which ltd does not apply. Root gets its own name's lines (and an
//   exact `:0`) only: group, range and wildcard lines are not for root;
// - a more specific line wins whatever its place: a user's name or exact
//   uid over `@group` and exact gids over ranges over `*`; of lines as
//   specific, the later wins (files are read in order, so a later
//   file's line beats an earlier file's);
// - a soft limit above the hard one is lowered to it.
// Of the items, ltd applies the ones it passes on to ranks
// (resource_limits.h); nofile `unlimited` leaves the limit as it was (the
// kernel takes no infinite fd limit).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resource_limits.h"

namespace ltd {

// Whose lines apply: the user as NSS knows them.
struct LimitsUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;                    // primary
  std::vector<gid_t> gids;          // every group, the primary included
  std::vector<std::string> groups;  // their names, as far as NSS knows them
};

// A user's limits while files are applied in order. `base` (what a
// session starts from: ltd's own as it started) holds where no line
// applies.
class LimitsConf {
 public:
  // Bounds on what one call takes (a file is cut there; the rest ignored).
  static constexpr size_t kMaxBytes = 1 << 20;
  static constexpr size_t kMaxLineBytes = 4096;

  LimitsConf(LimitsUser user, std::vector<ResourceLimit> base);
  // The user looked up by `who`, once, at the first line with a domain:
  // files of comments alone (a stock limits.conf) cost no lookup.
  LimitsConf(std::function<LimitsUser()> who, std::vector<ResourceLimit> base);

  // Applies one file's bytes, as pam_limits would after the files before.
  // Returns how many lines were skipped as malformed (for a log line).
  size_t Apply(std::string_view bytes);

  // The limits as they stand: each soft no higher than its hard.
  std::vector<ResourceLimit> Result() const;

 private:
  // Lower is more specific (pam_limits' order).
  enum Source : int { kUser = 0, kGroup = 1, kRange = 3, kDefault = 4, kNone = 6 };
  struct Slot {
    ResourceLimit limit;
    int soft_from = kNone;
    int hard_from = kNone;
  };
  // The source a line's domain gives for this user; kNone: not theirs.
  int Matches(std::string_view domain) const;
  // One line's fields; false when malformed.
  bool Line(std::string_view line);

  const LimitsUser& user() const;

  mutable std::function<LimitsUser()> who_;
  mutable std::optional<LimitsUser> user_;
  std::vector<Slot> slots_;
};

}  // namespace ltd
