#include "dir_usage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "dir_entries.h"
#include "fd.h"
#include "mountinfo.h"

namespace ltd {
namespace {

constexpr int kMaxDepth = 2;
constexpr int kMaxEntries = 4096;

// `mount`: the id of the mount `fd` is on (nullopt: unknown, before
// Linux 5.8). An entry on another mount is neither counted nor entered: it
// is not the state dir's disk (a running job's errors/ is a tmpfs of its
// own, charged to its ranks' memory), and it may be a file system its user
// mounted there (their errors/ is theirs while the job runs), whose
// server could hold ltd's stat or open for as long as it liked.
uint64_t Walk(int fd, std::optional<int64_t> mount, int depth, int* budget) {
  const Fd dir(fd);
  uint64_t total = 0;
  ForEachDirEntry(dir.get(), [&](const char* name) {
    if (--*budget < 0) return false;
    // One look that says the entry's mount too, and asks no file system
    // anything (cached attributes alone: a FUSE server is not reached).
    struct statx sx {};
    if (statx(dir.get(), name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_BLOCKS,
              &sx) != 0 ||
        !OnMount(sx, mount)) {
      return true;
    }
    total += sx.stx_blocks * 512;
    if (S_ISDIR(sx.stx_mode) && depth < kMaxDepth) {
      const int sub = OpenDirOnMount(dir.get(), name, mount);
      if (sub >= 0) total += Walk(sub, mount, depth + 1, budget);
    }
    return true;
  });
  return total;
}

}  // namespace

uint64_t DirBytes(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int budget = kMaxEntries;
  return Walk(fd, MountIdAt(fd, ""), 0, &budget);
}

}  // namespace ltd
