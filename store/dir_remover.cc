#include "dir_remover.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "bytes.h"
#include "fd.h"
#include "mountinfo.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// A job's dir is a few levels deep; a tree deeper than this is left (each
// level holds an fd while the levels below go).
constexpr int kMaxDepth = 64;
// Mounts stacked on one entry that are detached before it is left.
constexpr int kMaxDetached = 1024;

// One tree being removed: where it lies (its entries are removed only
// there), and what was met on the way, for one line in the log.
struct Removal {
  std::optional<int64_t> mount;  // nullopt: not told (before Linux 5.8)
  dev_t dev = 0;
  int detached = 0;      // file systems mounted in the tree, detached
  int not_detached = 0;  // entries left with one still mounted on them
  int too_deep = 0;      // dirs past kMaxDepth, left
};

bool OnHome(const struct statx& sx, const Removal& r) {
  if (makedev(sx.stx_dev_major, sx.stx_dev_minor) != r.dev) return false;
  if (!r.mount) return true;
  return (sx.stx_mask & STATX_MNT_ID) != 0 && static_cast<int64_t>(sx.stx_mnt_id) == *r.mount;
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
  for (int n = 0; n < kMaxDetached; ++n) {
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
  if (depth >= kMaxDepth) {
    ++r.too_deep;
    return false;
  }
  // Entered only while still on the tree's mount: one mounted since the
  // look is not.
  const int sub = OpenDirOnMount(dir, name, r.mount);
  if (sub < 0) return false;
  struct stat st {};
  if (fstat(sub, &st) != 0 || st.st_dev != r.dev) {
    close(sub);
    return false;
  }
  const bool all = Empty(sub, depth + 1, r);
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
  if (r.too_deep > 0) {
    spdlog::warn("remove {}: {} dirs deeper than {} levels left", ForLog(path), r.too_deep,
                 kMaxDepth);
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
