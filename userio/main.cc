// lt-userio: does for a job's user what must not be done with root's
// power: opens, checks and writes the files the user named (--output,
// --error). ltd, lt-shim and ltrun start it (process/user_io.h); it
// starts as root, with an empty environment and only fds 0 to 3 (see
// protocol.h), and becomes the user before anything else:
//
//   lt-userio check|write [--umask OOO] [--user UID:GID [--groups GID,...]...]
//
// `check`: whether each file of the request could be written (submit
// time); answers "ok" or "fail INDEX KIND MESSAGE" (KIND: "refused" when
// the message says what the file is and what to give instead, "error" for
// a failed call) and exits. `write`: opens every file of the request,
// answers the same way, then appends the frames on fd 0 to them until
// EOF. A file that refuses a write gets nothing more ("stopped INDEX
// MESSAGE" on fd 1). The user's file system may keep it waiting in the
// kernel for ever: the root side never waits on it past a deadline, and it
// holds nothing of theirs (no fd, no lock) that could keep them from
// exiting or restarting.
//
// Standard library only, like lt-exec: no NSS (root passes the groups),
// nothing the user controls read before the ids change.
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "become_user.h"
#include "output_file.h"
#include "protocol.h"

namespace {

using namespace ltd::userio;

void Say(const std::string& line) {
  std::string l = line;
  for (char& c : l) {
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  }
  if (l.size() >= kMaxAnswer) l.resize(kMaxAnswer - 1);
  l.push_back('\n');
  for (size_t at = 0; at < l.size();) {
    const ssize_t n = write(kAnswerFd, l.data() + at, l.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nobody listens any more
    at += static_cast<size_t>(n);
  }
}

[[noreturn]] void Fail(const std::string& why) {
  Say("fail 0 error lt-userio: " + why);
  _exit(2);
}

struct Request {
  bool truncate = false;
  std::vector<std::pair<bool, std::string>> files;  // dir_only, path
};

Request ReadRequest() {
  std::string raw;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(kRequestFd, buf, sizeof buf);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      if (raw.size() > kMaxRequest) Fail("the request is too large");
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      Fail(std::string("read(request): ") + std::strerror(errno));
    }
  }
  close(kRequestFd);
  size_t at = 0;
  auto next = [&]() -> std::string {
    const size_t end = raw.find('\0', at);
    if (end == std::string::npos) Fail("the request is garbled");
    std::string field = raw.substr(at, end - at);
    at = end + 1;
    return field;
  };
  auto flag = [&]() -> bool {
    const std::string f = next();
    if (f != "0" && f != "1") Fail("the request is garbled");
    return f == "1";
  };
  Request req;
  req.truncate = flag();
  const std::string count = next();
  char* end = nullptr;
  const unsigned long n = std::strtoul(count.c_str(), &end, 10);
  if (count.empty() || *end != '\0' || n > kMaxFiles) Fail("the request is garbled");
  for (unsigned long i = 0; i < n; ++i) {
    const bool dir_only = flag();
    std::string path = next();
    if (path.empty()) Fail("the request names an empty path");
    req.files.emplace_back(dir_only, std::move(path));
  }
  return req;
}

void ParseGroups(const char* list, std::vector<gid_t>& groups) {
  for (const char* at = list;;) {
    char* end = nullptr;
    errno = 0;
    const unsigned long g = std::strtoul(at, &end, 10);
    if (end == at || *at < '0' || *at > '9' || errno != 0 || g >= static_cast<gid_t>(-1) ||
        (*end != ',' && *end != '\0')) {
      Fail("--groups takes GID,GID,...");
    }
    if (groups.size() >= NGROUPS_MAX) Fail("more groups than the kernel takes");
    groups.push_back(static_cast<gid_t>(g));
    if (*end == '\0') return;
    at = end + 1;
  }
}

void FailAt(size_t index, const Outcome& o) {
  Say("fail " + std::to_string(index) + (o.refused ? " refused " : " error ") + o.message);
}

int Check(const Request& req) {
  for (size_t i = 0; i < req.files.size(); ++i) {
    const Outcome o = CheckOutputFile(req.files[i].second, req.files[i].first);
    if (!o.message.empty()) {
      FailAt(i, o);
      return 1;
    }
  }
  Say("ok");
  return 0;
}

// Writes all of `iov`; 0, or the errno that stopped it.
int WriteAll(int fd, std::vector<iovec>& iov) {
  size_t at = 0;
  while (at < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - at, IOV_MAX));
    const ssize_t n = writev(fd, &iov[at], count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    size_t done = static_cast<size_t>(n);
    while (at < iov.size() && done >= iov[at].iov_len) done -= iov[at++].iov_len;
    if (done > 0) {
      iov[at].iov_base = static_cast<char*>(iov[at].iov_base) + done;
      iov[at].iov_len -= done;
    }
  }
  return 0;
}

int Write(const Request& req) {
  std::vector<int> fds;
  for (size_t i = 0; i < req.files.size(); ++i) {
    const Outcome o = OpenOutputFile(req.files[i].second, req.truncate);
    if (o.fd < 0) {
      FailAt(i, o);
      return 1;
    }
    fds.push_back(o.fd);
  }
  Say("ok");
  // What one read brings is written before the next: each file's frames of
  // it, in order, in one writev.
  std::vector<char> buf(4 << 20);
  size_t have = 0;
  std::vector<std::vector<iovec>> writes(fds.size());
  std::vector<bool> stopped(fds.size(), false);
  for (;;) {
    const ssize_t n = read(kFramesFd, buf.data() + have, buf.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    if (n == 0) break;
    have += static_cast<size_t>(n);
    size_t at = 0;
    while (have - at >= sizeof(FrameHeader)) {
      FrameHeader h;
      std::memcpy(&h, buf.data() + at, sizeof h);
      if (h.file >= fds.size() || h.length > kMaxFrame) Fail("a garbled frame");
      if (have - at - sizeof h < h.length) break;
      if (!stopped[h.file] && h.length > 0) {
        writes[h.file].push_back(iovec{buf.data() + at + sizeof h, h.length});
      }
      at += sizeof h + h.length;
    }
    for (size_t f = 0; f < fds.size(); ++f) {
      if (writes[f].empty()) continue;
      if (const int err = WriteAll(fds[f], writes[f]); err != 0) {
        stopped[f] = true;
        Say("stopped " + std::to_string(f) + " write(" + req.files[f].second +
            "): " + std::strerror(err));
      }
      writes[f].clear();
    }
    std::memmove(buf.data(), buf.data() + at, have - at);
    have -= at;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Fail("no mode given; lt-userio check|write [--user UID:GID [--groups ...]]");
  const std::string mode = argv[1];
  if (mode != "check" && mode != "write") Fail("unknown mode " + mode);
  bool change = false;
  uid_t uid = getuid();
  gid_t gid = getgid();
  std::vector<gid_t> groups;
  mode_t mask = 077;  // the files it creates: private unless told
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--user") == 0 && i + 1 < argc) {
      unsigned long u = 0, g = 0;
      char tail = 0;
      if (std::sscanf(argv[++i], "%lu:%lu%c", &u, &g, &tail) != 2) Fail("--user takes UID:GID");
      change = true;
      uid = static_cast<uid_t>(u);
      gid = static_cast<gid_t>(g);
    } else if (std::strcmp(argv[i], "--umask") == 0 && i + 1 < argc) {
      unsigned long m = 0;
      char tail = 0;
      if (std::sscanf(argv[++i], "%lo%c", &m, &tail) != 1 || m > 0777) {
        Fail("--umask takes an octal mode of 0 to 777");
      }
      mask = static_cast<mode_t>(m);
    } else if (std::strcmp(argv[i], "--groups") == 0 && i + 1 < argc) {
      ParseGroups(argv[++i], groups);
    } else {
      Fail(std::string("unknown argument ") + argv[i]);
    }
  }
  // Nothing but fds 0 to 3 (the spawn left no other; this is belt and
  // braces against a root fd the user could reach through this process).
  ltd::userio::CloseFdsFrom(kRequestFd + 1);
  if (const std::string why = BecomeUser(change, uid, gid, groups); !why.empty()) Fail(why);
  // From here on, as the user, with the umask the user submitted with.
  umask(mask);
  if (chdir("/") != 0) Fail(std::string("chdir(/): ") + std::strerror(errno));
  const Request req = ReadRequest();
  return mode == "check" ? Check(req) : Write(req);
}
