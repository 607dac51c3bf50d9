#include "resource_limits.h"

#include <algorithm>

#include "bytes.h"
#include "str_util.h"

namespace ltd {
namespace {

struct Named {
  int resource;
  std::string_view name;
};

constexpr Named kNamed[] = {
    {RLIMIT_AS, "AS"},         {RLIMIT_CORE, "CORE"},   {RLIMIT_CPU, "CPU"},
    {RLIMIT_DATA, "DATA"},     {RLIMIT_FSIZE, "FSIZE"}, {RLIMIT_MEMLOCK, "MEMLOCK"},
    {RLIMIT_NOFILE, "NOFILE"}, {RLIMIT_NPROC, "NPROC"}, {RLIMIT_RSS, "RSS"},
    {RLIMIT_STACK, "STACK"},
};

std::string Value(uint64_t v) { return v == RLIM_INFINITY ? "inf" : std::to_string(v); }

}  // namespace

const std::vector<int>& PropagatedResources() {
  static const std::vector<int> all = [] {
    std::vector<int> v;
    for (const Named& n : kNamed) v.push_back(n.resource);
    return v;
  }();
  return all;
}

std::string_view ResourceName(int resource) {
  for (const Named& n : kNamed) {
    if (n.resource == resource) return n.name;
  }
  return "?";
}

std::optional<int> ResourceByName(std::string_view name) {
  for (const Named& n : kNamed) {
    if (n.name == name) return n.resource;
  }
  return std::nullopt;
}

std::vector<ResourceLimit> OwnLimits() {
  std::vector<ResourceLimit> out;
  for (int r : PropagatedResources()) {
    rlimit lim{};
    if (getrlimit(static_cast<__rlimit_resource>(r), &lim) != 0) continue;
    out.push_back(ResourceLimit{r, lim.rlim_cur, lim.rlim_max});
  }
  return out;
}

const std::vector<ResourceLimit>& StartLimits() {
  static const std::vector<ResourceLimit> start = OwnLimits();
  return start;
}

absl::StatusOr<std::vector<ResourceLimit>> RankLimits(const std::vector<AskedLimit>& asked,
                                                      const std::vector<ResourceLimit>& own) {
  std::vector<ResourceLimit> out = own;
  for (const AskedLimit& a : asked) {
    auto resource = ResourceByName(a.name);
    if (!resource) {
      return absl::InvalidArgumentError(Cat(
          "resource limit '", DisplayEscapeElided(a.name, 32, Controls::kEscape),
          "' is not one ltd passes on (AS CORE CPU DATA FSIZE MEMLOCK NOFILE NPROC RSS STACK)"));
    }
    if (a.soft > a.hard) {
      return absl::InvalidArgumentError(
          Cat("resource limit ", DisplayEscapeElided(a.name, 32, Controls::kEscape), ": soft ",
              Value(a.soft), " is above hard ", Value(a.hard)));
    }
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const ResourceLimit& l) { return l.resource == *resource; });
    if (it == out.end()) continue;  // ltd cannot read its own: leave it
    it->hard = std::min(it->hard, a.hard);
    it->soft = std::min({it->soft, a.soft, it->hard});
  }
  return out;
}

std::string FormatLimit(const ResourceLimit& limit) {
  return Cat(limit.resource, ":", limit.soft, ":", limit.hard);
}

}  // namespace ltd
