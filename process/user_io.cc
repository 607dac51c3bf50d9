#include "user_io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "bytes.h"
#include "exec_shim_args.h"
#include "helper_reaper.h"
#include "helper_spawn.h"
#include "pidfd.h"
#include "posix_error.h"
#include "protocol.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

using Clock = std::chrono::steady_clock;

// The request on lt-userio's fd 3 (userio/protocol.h).
absl::StatusOr<Fd> WriteRequest(const std::vector<UserFile>& files, bool truncate) {
  std::string req = truncate ? "1" : "0";
  req.push_back('\0');
  req.append(std::to_string(files.size())).push_back('\0');
  for (const UserFile& f : files) {
    if (f.path.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(Cat(ForLog(f.path), " holds a NUL byte"));
    }
    req.append(f.dir_only ? "1" : "0").push_back('\0');
    req.append(f.path).push_back('\0');
  }
  Fd fd(memfd_create("lt-userio-request", MFD_CLOEXEC));
  if (!fd.valid()) return PosixError("memfd_create", "lt-userio's request", errno);
  for (size_t off = 0; off < req.size();) {
    const ssize_t n = write(fd.get(), req.data() + off, req.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return PosixError("write", "lt-userio's request", errno);
    off += static_cast<size_t>(n);
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return PosixError("lseek", "lt-userio's request", errno);
  return fd;
}

// One lt-userio from its start until it is handed to the reaper.
struct Helper {
  uid_t uid = 0;
  pid_t pid = -1;
  Fd pidfd;
  Fd answer;  // its fd 1 (non-blocking); EOF once it has exited
  Fd frames;  // its fd 0 in `write` (non-blocking)
  std::string got;
  bool eof = false;  // its answer pipe: it has exited
  bool adopted = false;

  ~Helper() { Leave(/*kill=*/true); }

  void Kill() {
    if (pidfd.valid()) {
      PidfdSendSignal(pidfd.get(), SIGKILL);
    } else {
      kill(pid, SIGKILL);  // not reaped yet (only the reaper does): still ours
    }
  }
  // Hands it to the reaper, killed first unless it is ending by itself.
  void Leave(bool kill) {
    if (adopted || pid <= 0) return;
    if (kill) Kill();
    adopted = true;
    HelperReaper::Get().Adopt(uid, pid, std::move(pidfd));
  }

  // Reads its answer pipe until a whole line or EOF, or `deadline`.
  // Returns the line; nullopt at the deadline; "" at EOF without one.
  std::optional<std::string> Line(Clock::time_point deadline) {
    for (;;) {
      if (const size_t nl = got.find('\n'); nl != std::string::npos) {
        std::string line = got.substr(0, nl);
        got.erase(0, nl + 1);
        return line;
      }
      if (eof) return std::string();
      if (got.size() > userio::kMaxAnswer) {  // garbled: no line ends
        got.clear();
        return std::string();
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{answer.get(), POLLIN, 0};
      const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (rc <= 0) continue;
      char buf[4096];
      const ssize_t n = read(answer.get(), buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        eof = true;
        continue;  // a last line without its newline is dropped with `got`
      }
      got.append(buf, static_cast<size_t>(n));
    }
  }

  // Its first answer: ok, or which file failed and why.
  absl::Status Answer(Clock::time_point deadline, std::chrono::milliseconds waited,
                      UserFileFailure* failure) {
    const std::optional<std::string> line = Line(deadline);
    if (!line) {
      spdlog::warn("lt-userio pid={} for uid {} did not answer in {} ms; killed and left", pid, uid,
                   waited.count());
      Leave(/*kill=*/true);
      return absl::DeadlineExceededError(Cat("its file system did not answer in ", waited.count(),
                                             " ms; give a path on a file system that answers"));
    }
    if (*line == "ok") return absl::OkStatus();
    // "fail INDEX KIND MESSAGE"
    std::string_view rest(*line);
    if (rest.substr(0, 5) != "fail ") {
      return absl::InternalError(line->empty() ? "lt-userio ended without answering"
                                               : Cat("lt-userio answered '", ForLog(*line), "'"));
    }
    rest.remove_prefix(5);
    const size_t sp = rest.find(' ');
    const size_t index =
        static_cast<size_t>(std::strtoull(std::string(rest.substr(0, sp)).c_str(), nullptr, 10));
    rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp + 1);
    const bool refused = rest.substr(0, 8) == "refused ";
    if (refused) {
      rest.remove_prefix(8);
    } else if (rest.substr(0, 6) == "error ") {
      rest.remove_prefix(6);
    }
    if (failure != nullptr) {
      failure->file = index;
      failure->refused = refused;
    }
    const std::string message(rest);
    return refused ? absl::FailedPreconditionError(message) : absl::PermissionDeniedError(message);
  }
};

// The writer: its frames pipe, then its end.
class WriterSink final : public UserFileSink {
 public:
  explicit WriterSink(std::unique_ptr<Helper> h) : h_(std::move(h)) {}
  ~WriterSink() override { Finish(Clock::now()); }

  int fd() const override { return h_->frames.get(); }

  bool Finish(Clock::time_point deadline) override {
    if (h_->adopted) return false;
    h_->frames.reset();  // EOF: it writes what it has, then exits
    // Its answers until it exits (EOF), each a file that refused a write.
    bool ended = false;
    for (;;) {
      const std::optional<std::string> line = h_->Line(deadline);
      if (!line) break;
      if (h_->eof && line->empty()) {
        ended = true;
        break;
      }
      if (!line->empty()) spdlog::warn("--output: {}", ForLog(*line));
    }
    if (!ended) {
      spdlog::warn("lt-userio pid={} for uid {} still writes at its deadline; killed and left",
                   h_->pid, h_->uid);
    }
    h_->Leave(/*kill=*/!ended);
    return ended;
  }

 private:
  std::unique_ptr<Helper> h_;
};

absl::StatusOr<std::unique_ptr<Helper>> Start(const std::string& helper, const char* mode,
                                              const Credentials& who,
                                              const std::vector<UserFile>& files, bool truncate,
                                              mode_t umask) {
  const uid_t uid = who.uid;
  const gid_t gid = who.gid;
  const bool root = geteuid() == 0;
  if (!root && (uid != geteuid() || gid != getegid())) {
    return absl::PermissionDeniedError(Cat("cannot open files as uid ", uid, " without root"));
  }
  auto request = WriteRequest(files, truncate);
  if (!request.ok()) return request.status();
  char mask[8];
  std::snprintf(mask, sizeof mask, "%03o", static_cast<unsigned>(umask & 0777));
  std::vector<std::string> argv = {helper, mode, "--umask", mask};
  if (root) {
    const std::optional<std::vector<gid_t>> groups =
        who.groups ? who.groups : LoginGroups(uid, gid);
    if (!groups) {
      return absl::UnavailableError(
          Cat("cannot look up the groups of uid ", uid, " (see the supervisor's log)"));
    }
    AppendUserArgs(uid, gid, &*groups, argv);
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    return PosixError("pipe2", "lt-userio's answer", errno);
  Fd answer(p[0]), answer_wr(p[1]);
  // Its end blocks: it waits for nothing but its own writes.
  fcntl(answer_wr.get(), F_SETFL, 0);
  Fd frames, frames_rd;
  if (std::strcmp(mode, "write") == 0) {
    if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "lt-userio's lines", errno);
    frames_rd.reset(p[0]);
    frames.reset(p[1]);
    // Ours never blocks; a bigger pipe takes a burst with fewer wakeups
    // (the size is a wish: an unprivileged ltrun may get less).
    fcntl(frames.get(), F_SETFL, O_NONBLOCK);
    (void)fcntl(frames.get(), F_SETPIPE_SZ, 1 << 20);
  }
  if (!HelperReaper::Get().Reserve(uid, kMaxHelpersPerUser)) {
    return absl::ResourceExhaustedError(
        Cat("uid ", uid, " has ", kMaxHelpersPerUser,
            " file operations still waiting on their file system; give a path on a file system "
            "that answers"));
  }
  auto spawned = SpawnHelper(
      argv, {frames_rd.valid() ? frames_rd.get() : -1, answer_wr.get(), -1, request->get()});
  if (!spawned.ok()) {
    HelperReaper::Get().Unreserve(uid);
    return spawned.status();
  }
  auto h = std::make_unique<Helper>();
  h->uid = uid;
  h->pid = spawned->pid;
  h->pidfd = std::move(spawned->pidfd);
  h->answer = std::move(answer);
  h->frames = std::move(frames);
  return h;
}

}  // namespace

std::string UserIo::Beside(const std::string& exec_shim) {
  const size_t slash = exec_shim.rfind('/');
  return (slash == std::string::npos ? std::string(".") : exec_shim.substr(0, slash)) +
         "/lt-userio";
}

absl::Status UserIo::Check(const Credentials& who, const std::vector<UserFile>& files,
                           UserFileFailure* failure) {
  const Clock::time_point deadline = Clock::now() + deadline_;
  auto h = Start(helper_, "check", who, files, false, 077);
  if (!h.ok()) return h.status();
  absl::Status s = (*h)->Answer(deadline, deadline_, failure);
  (*h)->Leave(/*kill=*/false);  // it exits after its answer
  return s;
}

absl::StatusOr<std::unique_ptr<UserFileSink>> UserIo::Open(const Credentials& who,
                                                           const std::vector<std::string>& paths,
                                                           bool truncate, mode_t umask,
                                                           UserFileFailure* failure) {
  const Clock::time_point deadline = Clock::now() + deadline_;
  std::vector<UserFile> files;
  for (const std::string& p : paths) files.push_back(UserFile{p, false});
  auto h = Start(helper_, "write", who, files, truncate, umask);
  if (!h.ok()) return h.status();
  if (absl::Status s = (*h)->Answer(deadline, deadline_, failure); !s.ok()) return s;
  return std::unique_ptr<UserFileSink>(new WriterSink(std::move(*h)));
}

}  // namespace ltd
