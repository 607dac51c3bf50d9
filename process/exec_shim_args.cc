#include "exec_shim_args.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

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
    // Too small: n says how many there are (glibc), bounded by the kernel's
    // limit on supplementary groups.
    if (n <= static_cast<int>(groups.size()) || n > 65536) return {gid};
    groups.resize(static_cast<size_t>(n));
  }
}

void AppendUserArgs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                    std::vector<std::string>& argv) {
  if (uid == geteuid() && gid == getegid()) return;
  argv.push_back("--user");
  argv.push_back(Cat(uid, ":", gid));
  std::string list;
  for (gid_t g : groups) {
    if (!list.empty()) list.push_back(',');
    list += std::to_string(g);
  }
  if (list.empty()) list = std::to_string(gid);
  argv.push_back("--groups");
  argv.push_back(std::move(list));
}

}  // namespace ltd
