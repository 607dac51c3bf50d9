// lt_hang_fs: a FUSE file system that stops answering, for the tests of a
// user's --output on a file system that hangs (user_files_hang_e2e_test).
// A request it does not answer keeps its caller in the kernel, in an
// uninterruptible sleep once the request was read here, as a dead NFS
// server or a user's malicious FUSE server would:
//
//   /stuck*  its lookup is never answered (a stat or an open hangs)
//   /slow*   opens and truncates, but a write to it is never answered
//            (each name a file of its own: a write that waits holds its
//            file's lock, and would stall the next open of that file)
//   /late*   its lookup is answered 4.5 s late (a slow NFS server), then
//            it opens, and takes writes at once
//
//   lt_hang_fs MOUNTPOINT            (foreground, single-threaded, allow_other)
//   lt_hang_fs MOUNTPOINT --silent [FSNAME]
//                                    answers nothing at all once mounted (no
//                                    lookup, getattr, opendir, statfs, open
//                                    or access), as a server that stopped
//
// The test ends it by aborting the connection (/sys/fs/fuse/connections/N/
// abort), which fails every request still waiting, and unmounting.
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

constexpr int kLateMs = 4500;
// The inode bit that marks a /late* file: its writes are answered.
constexpr fuse_ino_t kLateBit = fuse_ino_t{1} << 46;

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Lookups of /late* not answered yet, in the order they came (each is due
// kLateMs after it came, so the first is due first).
struct Late {
  fuse_req_t req;
  fuse_entry_param entry;
  int64_t due_ms;
};
std::vector<Late> g_late;
std::vector<fuse_req_t>
    g_stuck;  // lookups of "stuck*" and writes of "slow*", never answered while mounted

void Attr(fuse_ino_t ino, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_nlink = 1;
  st->st_mode = ino == FUSE_ROOT_ID ? (S_IFDIR | 0777) : (S_IFREG | 0666);
  st->st_mtime = st->st_ctime = st->st_atime = time(nullptr);
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if (std::strncmp(name, "stuck", 5) == 0) {  // never answered while mounted
    g_stuck.push_back(req);
    return;
  }
  const bool late = std::strncmp(name, "late", 4) == 0;
  if (!late && std::strncmp(name, "slow", 4) != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e{};
  // A number of its own for each name (FNV-1a), never the root's.
  uint64_t h = 1469598103934665603ULL;
  for (const char* c = name; *c != '\0'; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
  e.ino = (h | 2) & 0x3fffffffffffULL;
  if (late) e.ino |= kLateBit;
  Attr(e.ino, &e.attr);
  if (late) {
    // Kept a minute once answered: the check's lstat, statfs and access,
    // and the job's open, wait for this one answer, not one each.
    e.entry_timeout = e.attr_timeout = 60;
    g_late.push_back(Late{req, e, NowMs() + kLateMs});
    return;
  }
  fuse_reply_entry(req, &e);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  Attr(ino, &st);
  fuse_reply_attr(req, &st, 0);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat*, int, fuse_file_info*) {
  struct stat st;
  Attr(ino, &st);
  fuse_reply_attr(req, &st, 0);
}

void Open(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  fi->direct_io = 1;  // every write reaches this server, none is cached
  fuse_reply_open(req, fi);
}

void Write(fuse_req_t req, fuse_ino_t ino, const char*, size_t size, off_t, fuse_file_info*) {
  if ((ino & kLateBit) != 0) {
    fuse_reply_write(req, size);
  } else {
    g_stuck.push_back(req);  // a /slow* file's: never answered while mounted
  }
}

// The session's loop, single-threaded as fuse_session_loop's, that also
// answers each late lookup when it is due.
int Serve(fuse_session* se) {
  const int fd = fuse_session_fd(se);
  fuse_buf buf{};
  int rc = 0;
  while (!fuse_session_exited(se)) {
    const int64_t now = NowMs();
    size_t due = 0;
    while (due < g_late.size() && g_late[due].due_ms <= now) {
      fuse_reply_entry(g_late[due].req, &g_late[due].entry);
      ++due;
    }
    g_late.erase(g_late.begin(), g_late.begin() + static_cast<std::ptrdiff_t>(due));
    const int timeout = g_late.empty() ? -1 : static_cast<int>(g_late.front().due_ms - now);
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, timeout);
    if (ready < 0 && errno != EINTR) {
      rc = -errno;
      break;
    }
    if (ready <= 0) continue;
    const int got = fuse_session_receive_buf(se, &buf);
    if (got == -EINTR || got == -EAGAIN) continue;
    if (got <= 0) {
      rc = got == -ENODEV ? 0 : got;  // ENODEV: unmounted or aborted
      break;
    }
    fuse_session_process_buf(se, &buf);
  }
  std::free(buf.mem);
  // What was never answered is answered now, so that libfuse frees it
  // (the kernel has let go of it: the mount is gone).
  for (fuse_req_t req : g_stuck) fuse_reply_err(req, EIO);
  for (const Late& late : g_late) fuse_reply_err(late.req, EIO);
  g_stuck.clear();
  g_late.clear();
  return rc;
}

void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

// --silent: every request held, never answered while mounted.
void Hold(fuse_req_t req) { g_stuck.push_back(req); }
fuse_lowlevel_ops SilentOps() {
  fuse_lowlevel_ops ops{};
  ops.lookup = [](fuse_req_t req, fuse_ino_t, const char*) { Hold(req); };
  ops.getattr = [](fuse_req_t req, fuse_ino_t, fuse_file_info*) { Hold(req); };
  ops.opendir = [](fuse_req_t req, fuse_ino_t, fuse_file_info*) { Hold(req); };
  ops.open = [](fuse_req_t req, fuse_ino_t, fuse_file_info*) { Hold(req); };
  ops.statfs = [](fuse_req_t req, fuse_ino_t) { Hold(req); };
  ops.access = [](fuse_req_t req, fuse_ino_t, int) { Hold(req); };
  return ops;
}
void Release(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

}  // namespace

int main(int argc, char** argv) {
  // MOUNTPOINT [--silent [FSNAME]]: FSNAME, lt_hang_fs by default, is
  // the mount's source in mountinfo (a user's FUSE server names it).
  const bool silent = argc >= 3 && std::strcmp(argv[2], "--silent") == 0;
  if (argc != 2 && !(silent && argc <= 4)) {
    std::fprintf(stderr, "usage: lt_hang_fs MOUNTPOINT [--silent [FSNAME]]\n");
    return 2;
  }
  fuse_lowlevel_ops ops{};
  ops.lookup = Lookup;
  ops.getattr = GetAttr;
  ops.setattr = SetAttr;
  ops.open = Open;
  ops.write = Write;
  ops.flush = Flush;
  ops.release = Release;
  if (silent) ops = SilentOps();
  std::string options = "allow_other,fsname=";
  options += argc == 4 ? argv[3] : "lt_hang_fs";
  char* fuse_argv[] = {argv[0], const_cast<char*>("-o"), options.data(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, nullptr);
  if (se == nullptr) {
    fuse_opt_free_args(&args);
    return 1;
  }
  if (fuse_session_mount(se, argv[1]) != 0) {
    fuse_session_destroy(se);
    fuse_opt_free_args(&args);
    return 1;
  }
  std::printf("mounted\n");
  std::fflush(stdout);
  const int rc = Serve(se);
  fuse_session_unmount(se);
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);  // what fuse_session_new's parse added
  return rc == 0 ? 0 : 1;
}
