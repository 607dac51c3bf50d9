#include "uv_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "exec_spec.h"
#include "fd.h"
#include "pidfd.h"
#include "process_scan.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

namespace {
constexpr int kStdout = 0, kStderr = 1;
}

struct UvLauncher::Pipe {
  uv_pipe_t handle{};
  Child* child = nullptr;
  int index = 0;
  bool reading = false;
};

struct UvLauncher::Child {
  UvLauncher* launcher = nullptr;
  uv_process_t proc{};
  Pipe pipes[2];  // stdout, stderr
  ControlReader::Id control = 0;  // the heartbeat fd's read end
  RankCallbacks callbacks;
  std::string job_id;
  int rank = 0;
  pid_t pid = 0;
  // Held from spawn until the child is freed. While it answers signal 0 the
  // process is not reaped, so its pid and its process group number (it
  // leads its own session) are still its own.
  Fd pidfd;
  int open_handles = 0;  // freed when the last close callback ran
};

namespace {

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

// libuv reaps every exited child in one pass and only then runs their exit
// callbacks, so a child whose callback has not run yet may be reaped
// already: only the pidfd can tell.
bool NotReaped(const Fd& pidfd) {
  return pidfd.valid() && PidfdSendSignal(pidfd.get(), 0) == 0;
}

}  // namespace

UvLauncher::UvLauncher(uv_loop_t* loop, std::unique_ptr<Containment> containment,
                       std::string exec_shim, std::unique_ptr<ControlReader> control)
    : loop_(loop),
      containment_(std::move(containment)),
      exec_shim_(std::move(exec_shim)),
      control_(std::move(control)) {}

UvLauncher::~UvLauncher() {
  // ltd stops only after every job ended; a child left here means a bug, and
  // it must not outlive us either.
  for (Child* child : children_) {
    if (NotReaped(child->pidfd)) kill(-child->pid, SIGKILL);
  }
}

absl::Status UvLauncher::BeginJob(const std::string& job_id) {
  return containment_->BeginJob(job_id);
}

absl::StatusOr<pid_t> UvLauncher::Spawn(const SpawnRequest& req, RankCallbacks callbacks) {
  auto child = std::make_unique<Child>();
  child->launcher = this;
  child->callbacks = std::move(callbacks);
  child->job_id = req.job_id;
  child->rank = req.rank;

  // lt-exec [--cgroup DIR] [--user UID:GID] --parent PID, with an empty
  // environment and what to run on fd 4: it runs as root, and nothing the
  // user sent may reach it (see exec_shim.cc).
  std::vector<std::string> argv = {exec_shim_};
  const std::string cgroup = containment_->RankCgroup(req.job_id, req.rank);
  if (!cgroup.empty()) {
    argv.push_back("--cgroup");
    argv.push_back(cgroup);
  }
  if (req.uid != geteuid() || req.gid != getegid()) {
    argv.push_back("--user");
    argv.push_back(Cat(req.uid, ":", req.gid));
  }
  argv.push_back("--parent");
  argv.push_back(std::to_string(getpid()));
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  char* no_env[] = {nullptr};
  auto spec = WriteExecSpec(req.cwd, req.argv, req.env);
  if (!spec.ok()) return spec.status();

  // The heartbeat fd: a socketpair as libuv makes for stdio, blocking on
  // the rank's side (shells write to it), read in batches on ours.
  int control[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    return absl::UnavailableError(Cat("cannot start ", req.argv.front(),
                                      ": socketpair: ", std::strerror(errno)));
  }
  Fd control_ours(control[0]), control_theirs(control[1]);
  if (fcntl(control_ours.get(), F_SETFL, O_NONBLOCK) != 0) {
    return absl::UnavailableError(Cat("fcntl(O_NONBLOCK): ", std::strerror(errno)));
  }
  // Only the rank writes; ltd never does, and sees EOF once it is gone.
  shutdown(control_ours.get(), SHUT_WR);

  uv_stdio_container_t stdio[5];
  stdio[0].flags = UV_IGNORE;  // /dev/null: ranks never read a terminal
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = control_theirs.get();
  static_assert(kExecSpecFd == 4);
  stdio[4].flags = UV_INHERIT_FD;  // lt-exec reads and closes it
  stdio[4].data.fd = spec->get();
  for (int i = 0; i < 2; ++i) {
    Pipe& p = child->pipes[i];
    p.child = child.get();
    p.index = i;
    uv_pipe_init(loop_, &p.handle, 0);
    p.handle.data = &p;
    stdio[i + 1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[i + 1].data.stream = reinterpret_cast<uv_stream_t*>(&p.handle);
  }
  uv_process_options_t options{};
  options.exit_cb = &UvLauncher::OnExit;
  options.file = args[0];
  options.args = args.data();
  options.env = no_env;
  options.stdio = stdio;
  options.stdio_count = 5;
  // Each rank leads a new session, hence its own process group.
  options.flags = UV_PROCESS_DETACHED;
  child->proc.data = child.get();
  const int rc = uv_spawn(loop_, &child->proc, &options);
  Child* raw = child.release();
  children_.insert(raw);
  raw->open_handles = 3;
  control_theirs.reset();  // the rank has its copies
  spec->reset();
  if (rc != 0) {
    for (Pipe& p : raw->pipes)
      uv_close(reinterpret_cast<uv_handle_t*>(&p.handle), &UvLauncher::OnClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&raw->proc), &UvLauncher::OnClosed);
    return absl::UnavailableError(Cat("cannot start ", req.argv.front(), ": ", uv_strerror(rc)));
  }
  raw->pid = raw->proc.pid;
  for (Pipe& p : raw->pipes) {
    uv_read_start(reinterpret_cast<uv_stream_t*>(&p.handle), &UvLauncher::OnAlloc,
                  &UvLauncher::OnRead);
    p.reading = true;
  }
  auto control_id = control_->Add(std::move(control_ours), [raw](std::string_view data) {
    if (raw->callbacks.on_control) raw->callbacks.on_control(data);
  });
  if (control_id.ok()) {
    raw->control = *control_id;
  } else {
    spdlog::error("job={} rank={}: {}; its heartbeats are lost", req.job_id, req.rank,
                  std::string(control_id.status().message()));
  }
  // Nothing reaps on another thread, so the child is still unreaped here
  // and the pidfd names it, not a successor.
  raw->pidfd.reset(PidfdOpen(raw->pid));
  if (!raw->pidfd.valid()) {
    const int err = errno;
    kill(raw->pid, SIGKILL);  // ours and unreaped: libuv reaps it, OnExit frees it
    raw->callbacks = {};
    return absl::UnavailableError(
        Cat("pidfd_open(", raw->pid, "): ", std::strerror(err),
            err == ENOSYS ? "; ltd needs Linux 5.3 or newer" : ""));
  }
  live_[req.job_id][req.rank] = raw;
  spdlog::debug("job={} rank={} pid={} spawned", req.job_id, req.rank, raw->pid);
  return raw->pid;
}

void UvLauncher::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* pipe = static_cast<Pipe*>(handle->data);
  UvLauncher* self = pipe->child->launcher;
  *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
}

void UvLauncher::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* pipe = static_cast<Pipe*>(stream->data);
  Child& child = *pipe->child;
  if (nread > 0) {
    child.launcher->Deliver(child, pipe->index,
                            std::string_view(buf->base, static_cast<size_t>(nread)));
    return;
  }
  if (nread == 0) return;  // EAGAIN
  // EOF or an error: this stream is done; the rank may live on.
  uv_read_stop(stream);
  pipe->reading = false;
  child.launcher->Deliver(child, pipe->index, {});
  uv_close(reinterpret_cast<uv_handle_t*>(stream), &UvLauncher::OnClosed);
}

void UvLauncher::Deliver(Child& child, int index, std::string_view data) {
  if (child.callbacks.on_output)
    child.callbacks.on_output(index == kStdout ? Stream::kStdout : Stream::kStderr, data);
}

void UvLauncher::DrainAndClose(Child& child) {
  // The rank is gone, so what it wrote is already in the pipes: read up to
  // EAGAIN without blocking. A descendant still holding a pipe loses the rest.
  control_->DrainAndRemove(child.control);
  child.control = 0;
  for (Pipe& p : child.pipes) {
    if (!p.reading) continue;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&p.handle));
    p.reading = false;
    uv_os_fd_t fd = -1;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(&p.handle), &fd) == 0) {
      for (;;) {
        const ssize_t n = read(fd, read_buf_, sizeof read_buf_);
        if (n > 0) {
          Deliver(child, p.index, std::string_view(read_buf_, static_cast<size_t>(n)));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
      }
    }
    Deliver(child, p.index, {});
    uv_close(reinterpret_cast<uv_handle_t*>(&p.handle), &UvLauncher::OnClosed);
  }
}

void UvLauncher::OnExit(uv_process_t* proc, int64_t exit_status, int term_signal) {
  auto* child = static_cast<Child*>(proc->data);
  UvLauncher* self = child->launcher;
  self->DrainAndClose(*child);
  ExitStatus status;
  status.exit_code = static_cast<int>(exit_status);
  status.term_signal = term_signal;
  auto on_exit = std::move(child->callbacks.on_exit);
  child->callbacks = {};
  if (auto job = self->live_.find(child->job_id); job != self->live_.end()) {
    if (auto it = job->second.find(child->rank); it != job->second.end() && it->second == child)
      job->second.erase(it);
    if (job->second.empty()) self->live_.erase(job);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(proc), &UvLauncher::OnClosed);
  if (on_exit) on_exit(status);
}

void UvLauncher::OnClosed(uv_handle_t* handle) {
  Child* child;
  if (handle->type == UV_PROCESS) {
    child = static_cast<Child*>(handle->data);
  } else {
    child = static_cast<Pipe*>(handle->data)->child;
  }
  child->launcher->MaybeFree(child);
}

void UvLauncher::MaybeFree(Child* child) {
  if (--child->open_handles > 0) return;
  children_.erase(child);
  delete child;
}

UvLauncher::Child* UvLauncher::Unreaped(const std::string& job_id, int rank) const {
  auto job = live_.find(job_id);
  if (job == live_.end()) return nullptr;
  auto it = job->second.find(rank);
  if (it == job->second.end() || !NotReaped(it->second->pidfd)) return nullptr;
  return it->second;
}

void UvLauncher::SignalRank(const std::string& job_id, int rank, int sig) {
  // kill() right after the check, on the one thread that reaps: the group
  // number cannot change hands in between.
  if (Child* child = Unreaped(job_id, rank)) kill(-child->pid, sig);
}

void UvLauncher::SignalProcess(const std::string& job_id, int rank, int sig) {
  auto job = live_.find(job_id);
  if (job == live_.end()) return;
  if (auto it = job->second.find(rank); it != job->second.end())
    PidfdSendSignal(it->second->pidfd.get(), sig);  // ESRCH once reaped
}

std::optional<int> UvLauncher::StopSignal(const std::string& job_id, int rank) {
  Child* child = Unreaped(job_id, rank);
  if (child == nullptr) return std::nullopt;
  // The rank is our child: waitid tells the signal that stopped it, and
  // WNOWAIT leaves that for libuv, which asks only for exits anyway.
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child->pidfd.get()), &info,
             WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid != 0 && info.si_code == CLD_STOPPED) {
    return info.si_status;
  }
  // Stopped before and already reported, or traced: /proc still says so.
  if (auto entry = ReadProcEntry(child->pid); entry && (entry->state == 'T' || entry->state == 't'))
    return 0;
  return std::nullopt;
}

void UvLauncher::KillJob(const std::string& job_id) {
  std::vector<pid_t> live;
  if (auto job = live_.find(job_id); job != live_.end()) {
    for (const auto& [rank, child] : job->second) {
      if (NotReaped(child->pidfd)) live.push_back(child->pid);
    }
  }
  containment_->KillJob(job_id, live);
}

void UvLauncher::EndJob(const std::string& job_id, std::function<void()> on_empty) {
  containment_->EndJob(job_id, std::move(on_empty));
}

}  // namespace ltd
