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
#include <vector>

#include "fd.h"
#include "file_io.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPerRank = 1 << 20;

std::string Errors(const std::string& job_dir) { return job_dir + "/errors"; }
// Where the tmpfs's files are copied before it goes; renamed to errors/.
std::string Kept(const std::string& job_dir) { return job_dir + "/errors.kept"; }

Fd OpenDir(const std::string& path) {
  return Fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// errors/ is a mount point: another device than the job dir it is in.
bool IsMountPoint(int errors_fd, const std::string& job_dir) {
  struct stat inner {
  }, outer{};
  if (fstat(errors_fd, &inner) != 0 || stat(job_dir.c_str(), &outer) != 0) return false;
  return inner.st_dev != outer.st_dev;
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
                          const std::optional<ErrorDirBound>& bound) {
  const std::string errors = Errors(job_dir);
  // The job dir is root's: nobody but root can have put a link there, and
  // O_NOFOLLOW says so should that ever change. The mount goes onto this
  // very dir (through its fd), not onto whatever the path names later.
  Fd dir = OpenDir(errors);
  if (!dir.valid()) return PosixError("open", errors, errno);
  if (IsMountPoint(dir.get(), job_dir)) return absl::OkStatus();  // opened before
  absl::Status mounted = absl::OkStatus();
  if (bound) {
    const std::string options = Cat("size=", bound->bytes, ",nr_inodes=", bound->files + 1,
                                    ",mode=0700,uid=", uid, ",gid=", gid);
    const std::string target = Cat("/proc/self/fd/", dir.get());
    if (mount("ltd-errors", target.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              options.c_str()) == 0) {
      return absl::OkStatus();
    }
    mounted = PosixError("mount tmpfs", errors, errno);
  }
  if (fchown(dir.get(), uid, gid) != 0) return PosixError("fchown", errors, errno);
  return mounted;
}

absl::StatusOr<ErrorDirUse> CloseErrorDir(const std::string& job_dir) {
  const std::string errors = Errors(job_dir);
  ErrorDirUse use;
  Fd dir = OpenDir(errors);
  if (!dir.valid()) {
    if (errno == ENOENT) return use;
    return PosixError("open", errors, errno);
  }
  if (!IsMountPoint(dir.get(), job_dir)) {
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
  // keep it mounted; its pages go with its last reference.
  if (umount2(errors.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
    return PosixError("umount", errors, errno);
  }
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
  Fd dir = OpenDir(Errors(job_dir));
  return dir.valid() && IsMountPoint(dir.get(), job_dir);
}

absl::StatusOr<std::string> ReadErrorFile(const std::string& path, uid_t uid, size_t max) {
  Fd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(path);
    return PosixError("open", path, errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return PosixError("fstat", path, errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != uid) {
    return absl::PermissionDeniedError(
        Cat(path, " is not a regular file of the job's user; ignored"));
  }
  return ReadFd(fd.get(), path, max);
}

}  // namespace ltd
