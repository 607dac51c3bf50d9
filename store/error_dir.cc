#include "error_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "bytes.h"
#include "fd.h"
#include "file_io.h"
#include "mountinfo.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPerRank = 1 << 20;
constexpr char kTmpfsSource[] = "ltd-errors";

std::string Errors(const std::string& job_dir) { return job_dir + "/errors"; }
// Where the tmpfs's files are copied before it goes; renamed to errors/.
std::string Kept(const std::string& job_dir) { return job_dir + "/errors.kept"; }

Fd OpenDir(const std::string& path) {
  return Fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

std::string ProcFd(int fd) { return Cat("/proc/self/fd/", fd); }

std::optional<int64_t> MountId(int fd) { return MountIdAt(fd, ""); }

// Whether `top` (an O_PATH fd of errors/) is on another mount than `job`
// (its job dir's): by their mounts' ids, which ask no file system
// anything; before Linux 5.8, by their devices (stat asks).
bool MountedOn(int job, int top) {
  const std::optional<int64_t> under = MountId(job), at = MountId(top);
  if (under && at) return *under != *at;
  struct stat inner {
  }, outer{};
  if (fstat(top, &inner) != 0 || fstat(job, &outer) != 0) return false;
  return inner.st_dev != outer.st_dev;
}

// The job dir and its errors/, as O_PATH fds (open, but nothing read).
struct Paths {
  Fd job;
  Fd errors;
};
absl::StatusOr<Paths> OpenPaths(const std::string& job_dir) {
  Paths p;
  p.job.reset(open(job_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!p.job.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(job_dir);
    return PosixError("open", job_dir, errno);
  }
  p.errors.reset(openat(p.job.get(), "errors", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!p.errors.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(Errors(job_dir));
    return PosixError("open", Errors(job_dir), errno);
  }
  return p;
}

// Whether mount `id` is a job's errors/ tmpfs, mounted by OpenErrorDir
// straight on the job dir's mount `under` (else `what` says what it is).
// A user can mount a FUSE file system of theirs on errors/ (it is theirs
// while the job runs), never a tmpfs: fusermount mounts fuse types alone.
// NotFound when mountinfo has no such mount (it went meanwhile).
absl::StatusOr<bool> IsOurTmpfs(int64_t id, int64_t under, std::string* what) {
  // Each mount a line of a few hundred bytes, at most mount-max of them.
  auto mountinfo = ReadWholeFile("/proc/self/mountinfo", 64 << 20);
  if (!mountinfo.ok()) return mountinfo.status();
  const std::optional<MountEntry> e = FindMount(*mountinfo, id);
  if (!e) return absl::NotFoundError(Cat("mount ", id, " is not in /proc/self/mountinfo"));
  if (e->parent == under && e->fs_type == "tmpfs" && e->source == kTmpfsSource) return true;
  // The user names both (a FUSE server's subtype and fsname): one line.
  *what = Cat("a ", ForLog(e->fs_type), " file system (", ForLog(e->source), ")");
  return false;
}

// errors/, reached without entering anything a user mounted on it: an
// O_PATH fd of the dir at the bottom of its stack (the job's tmpfs's
// root, or the plain dir), once whatever was mounted over it is detached
// (each by the fd that names exactly it, never by path). Opening an
// O_PATH fd and asking its mount's id reach no FUSE server; a FUSE server
// that stops answering can then hold no root process at the job's end.
struct Reached {
  Fd at;
  bool tmpfs = false;
};
// A stack that still grows past kMaxStackedMounts is left, and the close
// fails in the log.
absl::StatusOr<Reached> Reach(const std::string& job_dir, const ErrorDirMount* mounted) {
  const std::string errors = Errors(job_dir);
  for (int detached = 0;; ++detached) {
    auto paths = OpenPaths(job_dir);
    if (!paths.ok()) return paths.status();
    Reached r;
    r.at = std::move(paths->errors);
    const std::optional<int64_t> under = MountId(paths->job.get()), top = MountId(r.at.get());
    if (!under || !top) {
      // A kernel before 5.8: what is there is taken as it is.
      r.tmpfs = MountedOn(paths->job.get(), r.at.get());
      return r;
    }
    if (*top == *under) return r;
    // The tmpfs this process mounted and holds: its id names no other mount.
    if (mounted != nullptr && mounted->root.valid() && *top == mounted->id) {
      r.tmpfs = true;
      return r;
    }
    std::string what;
    const absl::StatusOr<bool> ours = IsOurTmpfs(*top, *under, &what);
    if (ours.ok() && *ours) {
      r.tmpfs = true;
      return r;
    }
    if (!ours.ok() && !absl::IsNotFound(ours.status())) return ours.status();
    if (detached == kMaxStackedMounts) {
      return absl::ResourceExhaustedError(
          Cat(errors, ": more than ", kMaxStackedMounts, " file systems mounted over it; left"));
    }
    if (!ours.ok()) continue;  // gone meanwhile: look again
    spdlog::warn("{}: {} was mounted over it by its user; detached", errors, what);
    if (umount2(ProcFd(r.at.get()).c_str(), MNT_DETACH) != 0) {
      return PosixError("umount", errors, errno);
    }
  }
}

// A tmpfs of `options` mounted on `dir` (an O_PATH fd of `name`): the fd
// of its root, which names this very mount whatever is mounted over it
// later or meanwhile (fsopen, fsmount and move_mount; no path is looked up
// again). Where fsopen is refused (before Linux 5.2, or a seccomp filter
// that does not know it), by mount(2): an empty Fd.
using MountOptions = std::vector<std::pair<const char*, std::string>>;
absl::StatusOr<Fd> MountTmpfs(int dir, const std::string& name, const MountOptions& options) {
  Fd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!fs.valid()) {
    std::string joined;
    for (const auto& [key, value] : options) {
      joined += Cat(joined.empty() ? "" : ",", key, "=", value);
    }
    if (mount(kTmpfsSource, ProcFd(dir).c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              joined.c_str()) != 0) {
      return PosixError("mount tmpfs", name, errno);
    }
    return Fd();
  }
  bool made = fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", kTmpfsSource, 0) == 0;
  for (const auto& [key, value] : options) {
    made = made && fsconfig(fs.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0) == 0;
  }
  made = made && fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) == 0;
  Fd root(made ? fsmount(fs.get(), FSMOUNT_CLOEXEC,
                         MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)
               : -1);
  if (!root.valid() ||
      move_mount(root.get(), "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    return PosixError("mount tmpfs", name, errno);
  }
  return root;
}

// The tmpfs alone, without whatever the user mounted inside it (a FUSE
// file system on one of its files would block root's open of it for as
// long as its server likes): a detached copy of just this mount, held by
// `tree` (an O_PATH fd), its root opened for reading. Where the kernel
// cannot make one (before Linux 5.2), the dir itself.
struct Alone {
  Fd tree;
  Fd root;
};
Alone TmpfsAlone(int errors_fd) {
  Alone a;
  a.tree.reset(open_tree(errors_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
  if (a.tree.valid()) {
    a.root.reset(openat(a.tree.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (a.root.valid()) return a;
  }
  spdlog::debug("errors/: open_tree: {}; copying from the mount as it is", std::strerror(errno));
  a.root.reset(dup(errors_fd));
  return a;
}

struct Entry {
  std::string name;
  uint64_t size = 0;
};

// The regular files at the top of `from`, smallest first: a rank's error
// record (a few KiB) is kept before a file that would take what is left.
// Subdirs are left out (torchelastic writes none); the tmpfs's inode
// count bounds how many there are.
absl::StatusOr<std::vector<Entry>> RegularFiles(int from, const std::string& name) {
  const int listed = dup(from);
  if (listed < 0) return PosixError("dup", name, errno);
  DIR* d = fdopendir(listed);
  if (d == nullptr) {
    close(listed);
    return PosixError("fdopendir", name, errno);
  }
  std::vector<Entry> files;
  for (;;) {
    errno = 0;
    dirent* e = readdir(d);
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st {};
    if (fstatat(from, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({e->d_name, static_cast<uint64_t>(st.st_size)});
  }
  const int err = errno;
  closedir(d);
  if (err != 0) return PosixError("readdir", name, err);
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) {
    return a.size != b.size ? a.size < b.size : a.name < b.name;
  });
  return files;
}

absl::Status PwriteAll(int fd, const char* data, size_t size, uint64_t at,
                       const std::string& name) {
  while (size > 0) {
    const ssize_t n = pwrite(fd, data, size, static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError("write", name, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
    at += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// Copies the first bytes of `in` (`size` long) into `out`, at most `budget`:
// the data SEEK_DATA and SEEK_HOLE find is written at its offset, a hole
// stays a hole (no block of the disk), and holes at the end are not copied.
// The copy's length.
absl::StatusOr<uint64_t> CopyData(int in, int out, uint64_t size, uint64_t budget,
                                  const std::string& name, std::string& buf) {
  const uint64_t limit = std::min(size, budget);
  uint64_t end = 0;
  uint64_t at = 0;
  while (at < limit) {
    off_t data = lseek(in, static_cast<off_t>(at), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // nothing but holes from `at` on
      if (errno != EINVAL && errno != EOPNOTSUPP) return PosixError("lseek", name, errno);
      data = static_cast<off_t>(at);  // holes unknown here: all of it is data
    }
    if (static_cast<uint64_t>(data) >= limit) break;
    const off_t hole = lseek(in, data, SEEK_HOLE);
    const uint64_t stop = hole < 0 ? limit : std::min(static_cast<uint64_t>(hole), limit);
    if (stop <= static_cast<uint64_t>(data)) break;  // no data where it said: done
    for (uint64_t pos = static_cast<uint64_t>(data); pos < stop;) {
      const ssize_t n = pread(in, buf.data(), std::min<uint64_t>(buf.size(), stop - pos),
                              static_cast<off_t>(pos));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return PosixError("read", name, errno);
      if (n == 0) return end;  // shorter than it said
      if (auto s = PwriteAll(out, buf.data(), static_cast<size_t>(n), pos, name); !s.ok()) return s;
      pos += static_cast<uint64_t>(n);
      end = pos;
    }
    at = stop;
  }
  return end;
}

// Copies the regular files at the top of `from` (the tmpfs) into `to`,
// root's and 0600, no more than `budget` bytes in all (the tmpfs's size):
// no link is followed, no FIFO or device opened for reading past its open,
// no hole written out. What was cut goes into `use`. With no file to copy
// (most jobs write none), `to` is not made: the dir under the mount,
// root's, 0700 and empty since MakeErrorDir, stays the job's errors/.
absl::Status CopyFiles(int from, const std::string& to, uint64_t budget, ErrorDirUse& use) {
  auto files = RegularFiles(from, to);
  if (!files.ok()) return files.status();
  if (files->empty()) return absl::OkStatus();
  if (mkdir(to.c_str(), 0700) != 0 && errno != EEXIST) return PosixError("mkdir", to, errno);
  Fd into = OpenDir(to);
  if (!into.valid()) return PosixError("open", to, errno);
  std::string buf(64 * 1024, '\0');
  for (const Entry& f : *files) {
    const std::string name = Cat(to, "/", f.name);
    Fd in(openat(from, f.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st {};
    if (!in.valid() || fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    Fd out(openat(into.get(), f.name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                  0600));
    if (!out.valid()) return PosixError("open", name, errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    auto kept = CopyData(in.get(), out.get(), size, budget, name, buf);
    if (!kept.ok()) return kept.status();
    // pwrite past a hole leaves the file as long as its data: no more.
    if (ftruncate(out.get(), static_cast<off_t>(*kept)) != 0) {
      return PosixError("ftruncate", name, errno);
    }
    budget -= std::min(budget, *kept);
    ++use.kept_files;
    if (*kept == size) continue;
    ++use.cut_files;
    if (use.cut.size() < ErrorsDir::kMaxCutListed) use.cut.push_back({f.name, *kept, size});
  }
  return absl::OkStatus();
}

// errors.kept/ (a close cut short after the unmount) becomes errors/.
absl::Status PutKeptInPlace(const std::string& job_dir) {
  const std::string errors = Errors(job_dir), kept = Kept(job_dir);
  if (access(kept.c_str(), F_OK) != 0) return absl::OkStatus();
  if (rmdir(errors.c_str()) != 0 && errno != ENOENT) return PosixError("rmdir", errors, errno);
  if (rename(kept.c_str(), errors.c_str()) != 0) return PosixError("rename", kept, errno);
  return absl::OkStatus();
}

// Closed already, as most jobs' ends find it (their supervisor closed it,
// and ltd makes sure): errors/ a dir of root's, 0700, on its job dir's
// mount. Two looks by path that ask no file system anything, where a close
// opens both dirs and looks at each. Anything else, or a kernel that does
// not say mounts (before 5.8): not known, and the close looks the long way.
bool ClosedAlready(const std::string& job_dir) {
  const int flags = AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC;
  constexpr unsigned kJob = STATX_TYPE | STATX_MNT_ID;
  constexpr unsigned kErrors = kJob | STATX_MODE | STATX_UID | STATX_GID;
  struct statx job {
  }, errors{};
  if (statx(AT_FDCWD, job_dir.c_str(), flags, kJob, &job) != 0 ||
      statx(AT_FDCWD, Errors(job_dir).c_str(), flags, kErrors, &errors) != 0 ||
      (job.stx_mask & kJob) != kJob || (errors.stx_mask & kErrors) != kErrors) {
    return false;
  }
  return S_ISDIR(job.stx_mode) && S_ISDIR(errors.stx_mode) && errors.stx_mnt_id == job.stx_mnt_id &&
         errors.stx_uid == 0 && errors.stx_gid == 0 && (errors.stx_mode & 07777) == 0700;
}

}  // namespace

ErrorDirBound ErrorDirShare(uint64_t job_max_log_bytes, int ranks) {
  ErrorDirBound b;
  const uint64_t wanted = kPerRank * static_cast<uint64_t>(std::max(ranks, 1));
  b.bytes = std::max(std::min(wanted, job_max_log_bytes / 8) / kPage * kPage, kPage);
  b.files = 16 + 4 * static_cast<uint64_t>(std::max(ranks, 1));
  return b;
}

absl::Status MakeErrorDir(const std::string& job_dir) {
  const std::string errors = Errors(job_dir);
  if (mkdir(errors.c_str(), 0700) != 0) return PosixError("mkdir", errors, errno);
  return absl::OkStatus();
}

absl::Status OpenErrorDir(const std::string& job_dir, uid_t uid, gid_t gid,
                          const std::optional<ErrorDirBound>& bound, ErrorDirMount* mounted) {
  const std::string errors = Errors(job_dir);
  // The job dir is root's: nobody but root can have put a link there, and
  // O_NOFOLLOW says so should that ever change. The mount goes onto this
  // very dir (through its fd), not onto whatever the path names later.
  auto paths = OpenPaths(job_dir);
  if (!paths.ok()) return paths.status();
  const int dir = paths->errors.get();
  if (MountedOn(paths->job.get(), dir)) return absl::OkStatus();  // opened before
  absl::Status bounded = absl::OkStatus();
  if (bound) {
    absl::StatusOr<Fd> root = MountTmpfs(dir, errors,
                                         {{"size", Cat(bound->bytes)},
                                          {"nr_inodes", Cat(bound->files + 1)},
                                          {"mode", "0700"},
                                          {"uid", Cat(uid)},
                                          {"gid", Cat(gid)}});
    if (root.ok()) {
      const std::optional<int64_t> id = root->valid() ? MountId(root->get()) : std::nullopt;
      if (mounted != nullptr && id) *mounted = ErrorDirMount{std::move(*root), *id};
      return absl::OkStatus();
    }
    bounded = root.status();
  }
  if (fchownat(dir, "", uid, gid, AT_EMPTY_PATH) != 0) return PosixError("fchown", errors, errno);
  return bounded;
}

absl::StatusOr<ErrorDirUse> CloseErrorDir(const std::string& job_dir, ErrorDirMount* mounted) {
  const std::string errors = Errors(job_dir);
  ErrorDirUse use;
  if ((mounted == nullptr || !mounted->root.valid()) && ClosedAlready(job_dir)) {
    if (auto s = PutKeptInPlace(job_dir); !s.ok()) return s;
    return use;
  }
  auto reached = Reach(job_dir, mounted);
  // What this process held of the tmpfs goes with the close (the fd kept
  // its id for it; the mount, if still there, is detached below).
  if (mounted != nullptr) *mounted = ErrorDirMount{};
  if (!reached.ok()) {
    if (absl::IsNotFound(reached.status())) return use;
    return reached.status();
  }
  if (!reached->tmpfs) {
    // Root's and 0700 already: closed before (by the job's supervisor,
    // whose close ltd makes sure of) or never opened. Nothing to change,
    // and no inode written for it.
    struct stat st {};
    if (fstat(reached->at.get(), &st) == 0 && st.st_uid == 0 && st.st_gid == 0 &&
        (st.st_mode & 07777) == 0700) {
      reached->at.reset();
      if (auto s = PutKeptInPlace(job_dir); !s.ok()) return s;
      return use;
    }
  }
  // The dir itself (the fd names it, not whatever is on top of it now).
  Fd dir(open(ProcFd(reached->at.get()).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return PosixError("open", errors, errno);
  if (!reached->tmpfs) {
    if (fchown(dir.get(), 0, 0) != 0) return PosixError("fchown", errors, errno);
    if (fchmod(dir.get(), 0700) != 0) return PosixError("fchmod", errors, errno);
    dir.reset();
    if (auto s = PutKeptInPlace(job_dir); !s.ok()) return s;
    return use;
  }
  use.mounted = true;
  struct statfs fs {};
  const bool counted = fstatfs(dir.get(), &fs) == 0;
  if (counted) {
    const uint64_t block = static_cast<uint64_t>(fs.f_bsize);
    use.bytes = static_cast<uint64_t>(fs.f_blocks - fs.f_bfree) * block;
    // The tmpfs's root dir takes one of its inodes.
    use.files = fs.f_files > fs.f_ffree ? static_cast<uint64_t>(fs.f_files - fs.f_ffree) - 1 : 0;
    use.full = fs.f_bfree == 0 || fs.f_ffree == 0;
  }
  // No more in all than the tmpfs's size, however the ranks wrote.
  const uint64_t size = static_cast<uint64_t>(fs.f_blocks) * static_cast<uint64_t>(fs.f_bsize);
  // A disk that refuses the copy loses the files, never leaves the mount.
  absl::Status copied = absl::OkStatus();
  if (counted && use.files == 0) {
    // Only its root: nothing to keep, and no file for anything to be
    // mounted on. (The copy's detached mount costs an RCU grace period of
    // every CPU when it goes: most jobs leave errors/ empty.)
  } else if (Alone alone = TmpfsAlone(dir.get()); alone.root.valid()) {
    copied = CopyFiles(alone.root.get(), Kept(job_dir), size, use);
  } else {
    copied = PosixError("dup", errors, errno);
  }
  dir.reset();
  // Detached: a rank stuck in the kernel with a file open there cannot
  // keep it mounted; its pages go with its last reference. With it goes
  // whatever was mounted on it since.
  if (umount2(ProcFd(reached->at.get()).c_str(), MNT_DETACH) != 0) {
    return PosixError("umount", errors, errno);
  }
  reached->at.reset();
  if (auto s = PutKeptInPlace(job_dir); !s.ok()) return s;
  if (!copied.ok()) use.not_kept = std::string(copied.message());
  return use;
}

bool NoteErrorDirUse(const ErrorDirUse& use, ErrorsDir& errors) {
  if (!use.mounted) return false;
  const ErrorsDir before = errors;
  errors.bytes = use.bytes;
  errors.files = use.files;
  errors.full = use.full;
  errors.cut = use.cut;
  errors.cut_files = use.cut_files;
  return errors != before;
}

bool ErrorDirMounted(const std::string& job_dir) {
  auto paths = OpenPaths(job_dir);
  return paths.ok() && MountedOn(paths->job.get(), paths->errors.get());
}

absl::Status DetachErrorDir(const std::string& job_dir) {
  for (int detached = 0; detached <= kMaxStackedMounts; ++detached) {
    auto paths = OpenPaths(job_dir);
    if (absl::IsNotFound(paths.status())) return absl::OkStatus();
    if (!paths.ok()) return paths.status();
    if (!MountedOn(paths->job.get(), paths->errors.get())) return absl::OkStatus();
    if (umount2(ProcFd(paths->errors.get()).c_str(), MNT_DETACH) != 0) {
      return PosixError("umount", Errors(job_dir), errno);
    }
  }
  return absl::ResourceExhaustedError(Cat(Errors(job_dir), ": more than ", kMaxStackedMounts,
                                          " file systems mounted over it; left"));
}

absl::StatusOr<std::string> ReadErrorFile(const std::string& job_dir, const std::string& name,
                                          uid_t uid, size_t max, const ErrorDirMount* mounted) {
  const std::string path = Cat(Errors(job_dir), "/", name);
  auto reached = Reach(job_dir, mounted);
  if (!reached.ok()) {
    if (absl::IsNotFound(reached.status())) return absl::NotFoundError(path);
    return reached.status();
  }
  Fd file(openat(reached->at.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!file.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(path);
    return PosixError("open", path, errno);
  }
  // A file system mounted on the file is not what the rank wrote.
  if (MountId(file.get()) != MountId(reached->at.get())) {
    return absl::PermissionDeniedError(Cat(path, " has a file system mounted on it; ignored"));
  }
  struct stat st {};
  if (fstat(file.get(), &st) != 0) return PosixError("fstat", path, errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != uid) {
    return absl::PermissionDeniedError(
        Cat(path, " is not a regular file of the job's user; ignored"));
  }
  // This very file, opened for reading (no FIFO to block on: it is regular).
  Fd fd(open(ProcFd(file.get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return PosixError("open", path, errno);
  return ReadFd(fd.get(), path, max);
}

}  // namespace ltd
