#include "mountinfo.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <charconv>

#include "fd.h"

namespace ltd {
namespace {

// A number as the kernel writes it: decimal digits, no sign, no leading 0.
std::optional<int64_t> Number(std::string_view s) {
  // from_chars takes a '-': "-0" would be 0.
  if (s.empty() || s[0] < '0' || s[0] > '9' || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 0) return std::nullopt;
  return n;
}

}  // namespace

std::vector<std::string_view> NonEmptyFields(std::string_view s, char sep) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) fields.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

std::string UnescapeMountinfo(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](size_t j) { return j < s.size() && s[j] >= '0' && s[j] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(
          static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::optional<int64_t> MountIdAt(int dir, const char* name) {
  struct statx sx {};
  const int flags =
      AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
  if (statx(dir, name, flags, 0, &sx) != 0 || (sx.stx_mask & STATX_MNT_ID) == 0) {
    return std::nullopt;
  }
  return static_cast<int64_t>(sx.stx_mnt_id);
}

bool OnMount(const struct statx& sx, std::optional<int64_t> mount) {
  return !mount ||
         ((sx.stx_mask & STATX_MNT_ID) != 0 && static_cast<int64_t>(sx.stx_mnt_id) == *mount);
}

int OpenDirOnMount(int dir, const char* name, std::optional<int64_t> mount) {
  Fd at(openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!at.valid() || (mount && MountIdAt(at.get(), "") != mount)) return -1;
  return openat(at.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

std::optional<MountEntry> FindMount(std::string_view mountinfo, int64_t id) {
  for (std::string_view line : NonEmptyFields(mountinfo, '\n')) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || Number(line.substr(0, space)) != id) continue;
    const std::vector<std::string_view> f = NonEmptyFields(line, ' ');
    // The optional tags end at a lone "-"; the type and source follow it.
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 6 || dash + 2 >= f.size()) return std::nullopt;
    const std::optional<int64_t> parent = Number(f[1]);
    if (!parent) return std::nullopt;
    MountEntry e;
    e.id = id;
    e.parent = *parent;
    e.mount_point = UnescapeMountinfo(f[4]);
    e.fs_type = UnescapeMountinfo(f[dash + 1]);
    e.source = UnescapeMountinfo(f[dash + 2]);
    return e;
  }
  return std::nullopt;
}

}  // namespace ltd
