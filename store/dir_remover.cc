#include "dir_remover.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "bytes.h"
#include "fd.h"
#include "mountinfo.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// A job's dir is a few levels deep. Each level entered holds an fd while
// the levels below go, so a dir deeper than this is moved up to the top of
// the tree and removed in a later pass: a tree of any depth costs at most
// this many fds (a user can make one as deep as they like where a dir of
// theirs is in it).
constexpr int kMaxDepth = 64;
// Passes over the top before the rest is left (a tree kept growing by
// someone holding a dir in it; 1024 passes is 65,536 levels).
constexpr int kMaxPasses = 1024;

// One tree being removed: where it lies (its entries are removed only
// there), and what was met on the way, for one line in the log.
struct Removal {
  std::optional<int64_t> mount;  // nullopt: not told (before Linux 5.8)
  dev_t dev = 0;
  int detached = 0;        // file systems mounted in the tree, detached
  int not_detached = 0;    // entries left with one still mounted on them
  int top = -1;            // the tree's top, where too deep dirs are moved
  uint64_t moved = 0;      // dirs moved up to the top
  uint64_t names = 0;      // names tried for them there
  bool left_deep = false;  // passes ran out
};

bool OnHome(const struct statx& sx, const Removal& r) {
  return makedev(sx.stx_dev_major, sx.stx_dev_minor) == r.dev && OnMount(sx, r.mount);
}

// One look at `name` in `dir`, link not followed, that asks no file system
// anything (cached attributes alone: a FUSE server mounted there is not
// reached) and says which mount the entry is on.
bool Look(int dir, const char* name, struct statx* sx) {
  return statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, sx) == 0;
}

// Detaches what is mounted on `name` in `dir` (each by an fd naming exactly
// it, never by a path) until the entry is on the tree's mount again; false
// when it could not be.
bool DetachFrom(int dir, const char* name, Removal& r) {
  for (int n = 0; n < kMaxStackedMounts; ++n) {
    struct statx sx {};
    if (!Look(dir, name, &sx)) return false;
    if (OnHome(sx, r)) return true;
    Fd at(openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!at.valid() || umount2(Cat("/proc/self/fd/", at.get()).c_str(), MNT_DETACH) != 0) break;
    ++r.detached;
  }
  ++r.not_detached;
  return false;
}

bool RemoveIn(int dir, const char* name, int depth, Removal& r);

// A dir too deep to enter with the fds held, moved up to the tree's top
// under a name of its own (for a later pass).
bool MoveToTop(int dir, const char* name, Removal& r) {
  for (int tries = 0; tries < 16; ++tries) {
    const std::string to = Cat(".deep.", r.names++);
    if (renameat2(dir, name, r.top, to.c_str(), RENAME_NOREPLACE) == 0) {
      ++r.moved;
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

// Every entry of the dir `fd` (which it takes) removed; false when any was
// left.
bool Empty(int fd, int depth, Removal& r) {
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return false;
  }
  bool all = true;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    all = RemoveIn(dirfd(d), e->d_name, depth, r) && all;
  }
  closedir(d);
  return all;
}

// Removes `name` in `dir` and, for a dir, what is in it, on the tree's
// mount alone: a file system mounted on it or below is detached, never
// entered, so nothing of a tree mounted there (a user's files, a bind
// mount of another dir) is removed, and no server of theirs is asked
// anything.
bool RemoveIn(int dir, const char* name, int depth, Removal& r) {
  struct statx sx {};
  if (!Look(dir, name, &sx)) return errno == ENOENT;
  if (!OnHome(sx, r) && (!DetachFrom(dir, name, r) || !Look(dir, name, &sx))) return false;
  if (!S_ISDIR(sx.stx_mode)) return unlinkat(dir, name, 0) == 0 || errno == ENOENT;
  if (depth >= kMaxDepth && r.top >= 0) return MoveToTop(dir, name, r);
  // Entered only while still on the tree's mount: one mounted since the
  // look is not.
  Fd sub(OpenDirOnMount(dir, name, r.mount));
  struct stat st {};
  if (!sub.valid() || fstat(sub.get(), &st) != 0 || st.st_dev != r.dev) return false;
  bool all = true;
  if (depth > 0) {
    all = Empty(sub.release(), depth + 1, r);
  } else {
    // The tree's top: passes until none moved a dir up to it.
    r.top = sub.get();
    for (int pass = 0;; ++pass) {
      if (pass == kMaxPasses) {
        r.left_deep = true;
        break;
      }
      const uint64_t moved = r.moved;
      // A fresh open each pass: readdir starts at the first entry again.
      const int again = openat(sub.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      all = again >= 0 && Empty(again, 1, r);
      if (r.moved == moved) break;
    }
    r.top = -1;
  }
  return all && (unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT);
}

}  // namespace

bool RemoveTree(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) return false;
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  Fd dir(open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct statx sx {};
  if (!dir.valid() ||
      statx(dir.get(), "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) != 0) {
    return false;
  }
  Removal r;
  r.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  if ((sx.stx_mask & STATX_MNT_ID) != 0) r.mount = static_cast<int64_t>(sx.stx_mnt_id);
  const bool all = RemoveIn(dir.get(), name.c_str(), 0, r);
  if (r.detached > 0) {
    spdlog::warn("remove {}: {} file system(s) mounted in it detached, nothing in them removed",
                 ForLog(path), r.detached);
  }
  if (r.not_detached > 0) {
    spdlog::warn("remove {}: {} entries left with a file system still mounted on them",
                 ForLog(path), r.not_detached);
  }
  if (r.left_deep) {
    spdlog::warn("remove {}: still growing after {} passes over it; the rest left", ForLog(path),
                 kMaxPasses);
  }
  return all;
}

DirRemover::~DirRemover() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DirRemover::Remove(std::string path) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(path));
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  cv_.notify_all();
}

void DirRemover::Drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
}

void DirRemover::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::string path = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    if (!RemoveTree(path)) spdlog::warn("remove {}: not all of it could be removed", ForLog(path));
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace ltd
