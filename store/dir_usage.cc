#include "dir_usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace ltd {
namespace {

constexpr int kMaxDepth = 2;
constexpr int kMaxEntries = 4096;

uint64_t Walk(int fd, int depth, int* budget) {
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return 0;
  }
  uint64_t total = 0;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (--*budget < 0) break;
    struct stat st {};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    total += static_cast<uint64_t>(st.st_blocks) * 512;
    if (S_ISDIR(st.st_mode) && depth < kMaxDepth) {
      const int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) total += Walk(sub, depth + 1, budget);
    }
  }
  closedir(d);
  return total;
}

}  // namespace

uint64_t DirBytes(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int budget = kMaxEntries;
  return Walk(fd, 0, &budget);
}

}  // namespace ltd
