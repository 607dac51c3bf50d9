#include "limits_conf.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

namespace ltd {
namespace {

struct Item {
  std::string_view name;
  int resource;  // -1: pam_limits knows it, ltd does not apply it
  uint64_t unit;
};

constexpr Item kItems[] = {
    {"as", RLIMIT_AS, 1024},
    {"core", RLIMIT_CORE, 1024},
    {"cpu", RLIMIT_CPU, 60},
    {"data", RLIMIT_DATA, 1024},
    {"fsize", RLIMIT_FSIZE, 1024},
    {"memlock", RLIMIT_MEMLOCK, 1024},
    {"nofile", RLIMIT_NOFILE, 1},
    {"nproc", RLIMIT_NPROC, 1},
    {"rss", RLIMIT_RSS, 1024},
    {"stack", RLIMIT_STACK, 1024},
    {"maxlogins", -1, 1},
    {"maxsyslogins", -1, 1},
    {"nonewprivs", -1, 1},
    {"priority", -1, 1},
    {"locks", -1, 1},
    {"sigpending", -1, 1},
    {"msgqueue", -1, 1},
    {"nice", -1, 1},
    {"rtprio", -1, 1},
    {"chroot", -1, 1},
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// A decimal number that fits in 64 bits; nullopt for anything else.
std::optional<uint64_t> Number(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// `MIN:MAX`, `:N` (exactly N), `MIN:` (MIN and up). `exact` says which.
struct IdRange {
  uint64_t min = 0;
  std::optional<uint64_t> max;
  bool exact = false;
  bool Holds(uint64_t id) const { return id >= min && (!max || id <= *max); }
};
std::optional<IdRange> Range(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view lo = s.substr(0, colon), hi = s.substr(colon + 1);
  IdRange r;
  if (lo.empty()) {
    auto n = Number(hi);
    if (!n) return std::nullopt;
    r.min = *n;
    r.max = *n;
    r.exact = true;
    return r;
  }
  auto n = Number(lo);
  if (!n) return std::nullopt;
  r.min = *n;
  if (!hi.empty()) {
    auto m = Number(hi);
    if (!m) return std::nullopt;
    r.max = *m;
  }
  return r;
}

}  // namespace

LimitsConf::LimitsConf(LimitsUser user, std::vector<ResourceLimit> base) : user_(std::move(user)) {
  for (const ResourceLimit& l : base) slots_.push_back(Slot{l});
}

LimitsConf::LimitsConf(std::function<LimitsUser()> who, std::vector<ResourceLimit> base)
    : who_(std::move(who)) {
  for (const ResourceLimit& l : base) slots_.push_back(Slot{l});
}

const LimitsUser& LimitsConf::user() const {
  if (!user_) user_ = std::exchange(who_, nullptr)();
  return *user_;
}

int LimitsConf::Matches(std::string_view domain) const {
  const LimitsUser& who = user();
  const bool root = who.uid == 0;
  if (domain == who.name) return kUser;
  if (domain.empty() || domain[0] == '%') return kNone;  // maxlogins' only
  if (domain == "*") return root ? kNone : kDefault;
  if (domain[0] == '@') {
    if (root) return kNone;
    const std::string_view group = domain.substr(1);
    if (auto r = Range(group)) {
      if (r->exact) {
        return std::any_of(who.gids.begin(), who.gids.end(), [&](gid_t g) { return r->Holds(g); })
                   ? kGroup
                   : kNone;
      }
      return r->Holds(who.gid) ? kRange : kNone;
    }
    return std::find(who.groups.begin(), who.groups.end(), group) != who.groups.end() ? kGroup
                                                                                      : kNone;
  }
  if (auto r = Range(domain)) {
    if (!r->Holds(who.uid)) return kNone;
    if (r->exact) return kUser;
    return root ? kNone : kRange;
  }
  return kNone;
}

bool LimitsConf::Line(std::string_view line) {
  std::string_view fields[5];
  size_t n = 0;
  for (size_t at = 0; at < line.size() && n < 5;) {
    while (at < line.size() && IsSpace(line[at])) ++at;
    if (at == line.size()) break;
    size_t end = at;
    while (end < line.size() && !IsSpace(line[end])) ++end;
    fields[n++] = line.substr(at, end - at);
    at = end;
  }
  if (n == 0) return true;
  // `<domain> -`: pam_limits' "no limits" line, which ends its reading for
  // that user; ltd keeps what it read (a limit is never dropped).
  if (n == 2 && fields[1] == "-") return true;
  if (n != 4) return false;
  const int from = Matches(fields[0]);
  const std::string type = Lower(fields[1]);
  const std::string item_name = Lower(fields[2]);
  const std::string value = Lower(fields[3]);
  const bool soft = type == "soft" || type == "-";
  const bool hard = type == "hard" || type == "-";
  if (!soft && !hard) return false;
  const Item* item = nullptr;
  for (const Item& i : kItems) {
    if (i.name == item_name) item = &i;
  }
  if (item == nullptr) return false;
  uint64_t limit = RLIM_INFINITY;
  if (value != "-1" && value != "unlimited" && value != "infinity") {
    auto v = Number(value);
    if (!v) return false;
    limit = *v > (RLIM_INFINITY - 1) / item->unit ? RLIM_INFINITY : *v * item->unit;
  }
  if (from == kNone || item->resource < 0) return true;
  if (item->resource == RLIMIT_NOFILE && limit == RLIM_INFINITY) return true;
  for (Slot& s : slots_) {
    if (s.limit.resource != item->resource) continue;
    if (soft && from <= s.soft_from) {
      s.limit.soft = limit;
      s.soft_from = from;
    }
    if (hard && from <= s.hard_from) {
      s.limit.hard = limit;
      s.hard_from = from;
    }
  }
  return true;
}

size_t LimitsConf::Apply(std::string_view bytes) {
  bytes = bytes.substr(0, kMaxBytes);
  size_t skipped = 0;
  for (size_t at = 0; at < bytes.size();) {
    size_t end = bytes.find('\n', at);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(at, end - at);
    at = end + 1;
    if (line.size() > kMaxLineBytes) {
      ++skipped;
      continue;
    }
    line = line.substr(0, line.find('#'));
    if (!Line(line)) ++skipped;
  }
  return skipped;
}

std::vector<ResourceLimit> LimitsConf::Result() const {
  std::vector<ResourceLimit> out;
  for (const Slot& s : slots_) {
    ResourceLimit l = s.limit;
    l.soft = std::min(l.soft, l.hard);
    out.push_back(l);
  }
  return out;
}

}  // namespace ltd
