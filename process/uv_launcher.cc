#include "uv_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>

#include "exec_shim_args.h"
#include "exec_shim_spawn.h"
#include "exec_spec.h"
#include "fd.h"
#include "pidfd.h"
#include "posix_error.h"
#include "process_scan.h"
#include "rank_clone.h"
#include "rank_start_plan.h"
#include "spawn_attr.h"
#include "spdlog/spdlog.h"
#include "stack_text.h"
#include "str_util.h"

namespace ltd {

namespace {
constexpr int kStdout = 0, kStderr = 1;
}

struct UvLauncher::Pipe {
  UvPtr<uv_pipe_t> handle;  // data: this Pipe; null once read to its end
  Child* child = nullptr;
  int index = 0;
  ReadPacer::Stream paced;  // its handle, once reading
};

// Owns the rank's handles: freeing it closes them, and from then on libuv
// calls none of their callbacks (uv_handle.h), so their `data`, which
// points into the Child, is never used again. Freed once the rank is
// reaped and its output drained.
struct UvLauncher::Child {
  UvLauncher* launcher = nullptr;
  ControlReader::Id control = 0;  // the heartbeat fd's read end
  RankCallbacks callbacks;
  std::string job_id;
  int rank = 0;
  pid_t pid = 0;
  // Held from spawn until the child is freed. While it answers signal 0 the
  // process is not reaped, so its pid and its process group number (it
  // leads its own session) are still its own. Declared before the handles:
  // the poll on it is closed first.
  Fd pidfd;
  UvPtr<uv_poll_t> exit_poll;  // the pidfd: readable once the rank exited
  Pipe pipes[2];               // stdout, stderr
  Fd stack;                    // the stack pipe's read end (kStackFd's), non-blocking
  // What the rank's start reads, until it is reaped (rank_clone.h); none
  // when it started through lt-exec.
  std::unique_ptr<RankChildMemory> start_memory;
};

namespace {

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

// A zombie still answers signal 0; once reaped, its pidfd says ESRCH.
bool NotReaped(const Fd& pidfd) { return pidfd.valid() && PidfdSendSignal(pidfd.get(), 0) == 0; }

// `sig` to the rank's process group, which is there once its start made it
// a session leader; before, the rank is a single process and gets it alone.
void SignalGroup(pid_t pid, const Fd& pidfd, int sig) {
  if (kill(-pid, sig) != 0 && errno == ESRCH) PidfdSendSignal(pidfd.get(), sig);
}

// What a rank's stdout or stderr holds before it waits: about what the
// sockets they once were held (net.core.wmem_default).
constexpr int kOutputPipeBytes = 256 * 1024;

// A pipe for what a rank writes: ours to read, theirs blocking. Never a
// socket: a socket carries file descriptors (SCM_RIGHTS), and one that
// ours reads without taking them is closed by our read, on our thread,
// where a TCP socket lingering for as long as its user set blocks the
// supervisor. `bytes` (0: the kernel's default) is what it holds before
// the rank waits; `flags`, pipe2's for both ends besides O_CLOEXEC.
absl::Status RankPipe(Fd& ours, Fd& theirs, int bytes, int flags = 0) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | flags) != 0) return PosixError("pipe2", "a rank's output", errno);
  ours.reset(fds[0]);
  theirs.reset(fds[1]);
  if (bytes > 0) (void)fcntl(fds[1], F_SETPIPE_SZ, bytes);  // the default 64 KiB else
  return AboveSpawnFds(theirs);
}

}  // namespace

UvLauncher::UvLauncher(uv_loop_t* loop, std::unique_ptr<Containment> containment,
                       std::string exec_shim, std::unique_ptr<ControlReader> control,
                       GroupsLookup::Lookup lookup)
    : loop_(loop),
      containment_(std::move(containment)),
      exec_shim_(std::move(exec_shim)),
      user_io_(UserIo::Beside(exec_shim_)),
      pacer_(loop, kJobOutputBytesPerSecond, &UvLauncher::OnAlloc, &UvLauncher::OnRead),
      control_(std::move(control)),
      groups_(std::move(lookup)) {
  containment_->LeaveToLauncher([this](pid_t pid) { return unreaped_.count(pid) != 0; });
  // A rank's start shares our memory as its user until its execve.
  if (geteuid() == 0) KeepRankChildrenOut();
}

UvLauncher::~UvLauncher() {
  // ltd stops only after every job ended; a child left here means a bug, and
  // it must not outlive us either.
  for (const auto& [raw, child] : children_) {
    if (!NotReaped(child->pidfd)) continue;
    SignalGroup(child->pid, child->pidfd, SIGKILL);
    // It may still run on its start's stack until the kill lands.
    if (child->start_memory) KeepRankChildMemoryToTheEnd(std::move(child->start_memory));
  }
  // Their handles close, so none calls back into us; the control reader,
  // destroyed next, drops their entries without calling them.
  children_.clear();
}

void UvLauncher::ExpectUser(uid_t uid, gid_t gid, const std::optional<std::vector<gid_t>>& groups) {
  if (uid == geteuid() && gid == getegid()) return;
  if (groups) {
    groups_.Set(uid, gid, *groups);
  } else {
    groups_.Start(uid, gid);
  }
}

absl::Status UvLauncher::BeginJob(const std::string& job_id, const JobLimits& limits) {
  return containment_->BeginJob(job_id, limits);
}

absl::StatusOr<pid_t> UvLauncher::Spawn(const SpawnRequest& req, RankCallbacks callbacks) {
  auto child = std::make_unique<Child>();
  child->launcher = this;
  child->callbacks = std::move(callbacks);
  child->job_id = req.job_id;
  child->rank = req.rank;

  auto fail = [&](const absl::Status& s) {
    return absl::UnavailableError(Cat("cannot start ", req.argv.front(), ": ", s.message()));
  };
  if (absl::Status s = CheckExecSpec(req.cwd, req.argv, req.env); !s.ok()) return s;
  std::optional<RankStartPlan::User> user;
  Fd groups_theirs;  // the groups, when NSS has not answered yet
  if (req.uid != geteuid() || req.gid != getegid()) {
    auto groups = groups_.GroupsForRank(req.uid, req.gid);
    if (!groups.ok()) return fail(groups.status());
    user.emplace();
    user->uid = req.uid;
    user->gid = req.gid;
    // As AppendUserArgs: an empty list is the primary group alone.
    if (groups->groups) {
      user->groups = groups->groups->empty() ? std::vector<gid_t>{req.gid} : *groups->groups;
    }
    if (groups->later.valid()) {
      groups_theirs = std::move(groups->later);
      user->later = true;
      if (absl::Status s = AboveSpawnFds(groups_theirs); !s.ok()) return fail(s);
    }
  }
  std::vector<RankLimit> limits;
  for (const auto& [resource, soft, hard] : req.rlimits) {
    limits.push_back({resource, rlimit{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)}});
  }
  auto plan = std::make_unique<RankStartPlan>(containment_->RankCgroups(req.job_id, req.rank),
                                              std::move(user), std::move(limits), getpid(),
                                              RankStartPlan::What{req.cwd, req.argv, req.env});

  // The heartbeat fd, stdout and stderr: pipes, blocking on the rank's
  // side (shells write to them). Heartbeats are read in batches on ours.
  Fd control_ours, control_theirs, out_ours[2], out_theirs[2];
  for (absl::Status s : {RankPipe(control_ours, control_theirs, 0),
                         RankPipe(out_ours[kStdout], out_theirs[kStdout], kOutputPipeBytes),
                         RankPipe(out_ours[kStderr], out_theirs[kStderr], kOutputPipeBytes)}) {
    if (!s.ok()) return fail(s);
  }
  if (fcntl(control_ours.get(), F_SETFL, O_NONBLOCK) != 0) {
    return fail(PosixError("fcntl(O_NONBLOCK)", "a rank's heartbeat fd", errno));
  }
  // The stack pipe: non-blocking on both ends, so that a faulthandler
  // dump larger than the pipe loses its tail rather than blocking the
  // rank inside its signal handler while nobody reads.
  Fd stack_ours, stack_theirs;
  if (absl::Status s =
          RankPipe(stack_ours, stack_theirs, static_cast<int>(kStackPipeBytes), O_NONBLOCK);
      !s.ok()) {
    return fail(s);
  }

  RankFds fds;
  fds.stdout_fd = out_theirs[kStdout].get();
  fds.stderr_fd = out_theirs[kStderr].get();
  fds.heartbeat = control_theirs.get();
  fds.stack = stack_theirs.get();
  fds.groups = groups_theirs.get();
  auto started = rank_children_ && (!plan->start().change_user || RankChildMaySwitchUsers())
                     ? CloneRank(fds, std::move(plan))
                     : SpawnExecShim(exec_shim_, fds, std::move(plan));
  if (!started.ok()) return fail(started.status());
  const pid_t pid = started->pid;
  Fd pidfd = std::move(started->pidfd);
  child->start_memory = std::move(started->memory);
  int rc_poll = 0;
  child->exit_poll = UvInit<uv_poll_t>(
      [&](uv_poll_t* h) { return rc_poll = uv_poll_init(loop_, h, pidfd.get()); });
  if (child->exit_poll) {
    child->exit_poll->data = child.get();
    rc_poll = uv_poll_start(child->exit_poll.get(), UV_READABLE, &UvLauncher::OnExitReadable);
  }
  if (rc_poll != 0) {
    // Its exit would never be seen: the rank must not run unwatched.
    child->exit_poll.reset();
    KillAndReap(pid);
    return fail(absl::UnavailableError(Cat("uv_poll(pidfd): ", uv_strerror(rc_poll))));
  }
  Child* raw = child.get();
  children_.emplace(raw, std::move(child));
  unreaped_.insert(pid);
  raw->pid = pid;
  raw->pidfd = std::move(pidfd);
  raw->stack = std::move(stack_ours);
  const std::shared_ptr<ReadPacer::Budget> budget = OutputBudget(req.job_id);
  for (int i = 0; i < 2; ++i) {
    Pipe& p = raw->pipes[i];
    p.child = raw;
    p.index = i;
    int rc_pipe = 0;
    p.handle = UvInit<uv_pipe_t>([&](uv_pipe_t* h) { return rc_pipe = uv_pipe_init(loop_, h, 0); });
    if (p.handle && (rc_pipe = uv_pipe_open(p.handle.get(), out_ours[i].get())) == 0) {
      out_ours[i].release();  // the pipe's now
      p.handle->data = &p;
      p.paced.handle = reinterpret_cast<uv_stream_t*>(p.handle.get());
      p.paced.budget = budget;
      rc_pipe = pacer_.Start(p.paced);
    }
    if (rc_pipe != 0) p.handle.reset();
    if (!p.handle) {
      spdlog::error("job={} rank={}: cannot read its {}: {}", req.job_id, req.rank,
                    i == kStdout ? "stdout" : "stderr", uv_strerror(rc_pipe));
    }
  }
  auto control_id = control_->Add(
      std::move(control_ours),
      [raw](std::string_view data) {
        if (raw->callbacks.on_control) raw->callbacks.on_control(data);
      },
      Cat("job=", req.job_id, " rank=", req.rank));
  if (control_id.ok()) {
    raw->control = *control_id;
  } else {
    spdlog::error("job={} rank={}: {}; its heartbeats are lost", req.job_id, req.rank,
                  std::string(control_id.status().message()));
  }
  live_[req.job_id][req.rank] = raw;
  spdlog::debug("job={} rank={} pid={} spawned", req.job_id, req.rank, raw->pid);
  return raw->pid;
}

std::shared_ptr<ReadPacer::Budget> UvLauncher::OutputBudget(const std::string& job_id) {
  std::erase_if(budgets_, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<ReadPacer::Budget>& held = budgets_[job_id];
  std::shared_ptr<ReadPacer::Budget> budget = held.lock();
  if (!budget) held = budget = pacer_.NewBudget();
  return budget;
}

void UvLauncher::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* pipe = static_cast<Pipe*>(handle->data);
  UvLauncher* self = pipe->child->launcher;
  *buf = uv_buf_init(self->read_buf_, sizeof self->read_buf_);
}

void UvLauncher::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* pipe = static_cast<Pipe*>(stream->data);
  Child& child = *pipe->child;
  UvLauncher* self = child.launcher;
  if (nread > 0) {
    self->pacer_.Took(pipe->paced, static_cast<size_t>(nread), buf->len);
    self->Deliver(child, pipe->index, std::string_view(buf->base, static_cast<size_t>(nread)));
    return;
  }
  if (nread == 0) return;  // EAGAIN
  // EOF or an error: this stream is done; the rank may live on.
  uv_read_stop(stream);
  self->pacer_.Forget(pipe->paced);
  self->Deliver(child, pipe->index, {});
  pipe->handle.reset();
}

void UvLauncher::Deliver(Child& child, int index, std::string_view data) {
  if (child.callbacks.on_output)
    child.callbacks.on_output(index == kStdout ? Stream::kStdout : Stream::kStderr, data);
}

void UvLauncher::DrainAndClose(Child& child) {
  // The rank is gone, so what it wrote is already in the pipes: read what
  // a pipe holds, at most, without blocking. A descendant still holding a
  // pipe loses the rest; one that writes as fast as we read would
  // otherwise keep this loop here for as long as it liked.
  control_->DrainAndRemove(child.control);
  child.control = 0;
  for (Pipe& p : child.pipes) {
    if (!p.handle) continue;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(p.handle.get()));
    pacer_.Forget(p.paced);
    uv_os_fd_t fd = -1;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(p.handle.get()), &fd) == 0) {
      const int holds = fcntl(fd, F_GETPIPE_SZ);
      for (ssize_t left = holds > 0 ? holds : kOutputPipeBytes; left > 0;) {
        const ssize_t n =
            read(fd, read_buf_, std::min(sizeof read_buf_, static_cast<size_t>(left)));
        if (n > 0) {
          Deliver(child, p.index, std::string_view(read_buf_, static_cast<size_t>(n)));
          left -= n;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
      }
    }
    Deliver(child, p.index, {});
    p.handle.reset();
  }
}

void UvLauncher::OnExitReadable(uv_poll_t* poll, int, int) {
  auto* child = static_cast<Child*>(poll->data);
  UvLauncher* self = child->launcher;
  // Reaped here and nowhere else: the subreaper's reaper leaves our
  // children alone (Containment::LeaveToLauncher).
  siginfo_t info{};
  int rc;
  do {
    rc = waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child->pidfd.get()), &info,
                WEXITED | WNOHANG);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0 && info.si_pid == 0) return;  // not exited after all
  if (rc != 0) {
    // Cannot happen to a child of ours; should it, the rank counts as
    // killed rather than being waited for for ever.
    spdlog::error("job={} rank={} pid={}: waitid: {}", child->job_id, child->rank, child->pid,
                  std::strerror(errno));
    info.si_code = CLD_KILLED;
    info.si_status = SIGKILL;
  }
  uv_poll_stop(poll);
  self->unreaped_.erase(child->pid);
  self->DrainAndClose(*child);
  ExitStatus status;
  if (info.si_code == CLD_EXITED) {
    status.exit_code = info.si_status;
  } else {
    status.term_signal = info.si_status;
  }
  auto on_exit = std::move(child->callbacks.on_exit);
  if (auto job = self->live_.find(child->job_id); job != self->live_.end()) {
    if (auto it = job->second.find(child->rank); it != job->second.end() && it->second == child)
      job->second.erase(it);
    if (job->second.empty()) self->live_.erase(job);
  }
  // Reaped and drained: nothing refers to the child any more. Freed before
  // on_exit runs, which may do anything, and with it its pidfd and the
  // handles (this poll too: libuv frees it after this callback).
  self->children_.erase(child);
  if (on_exit) on_exit(status);
}

UvLauncher::Child* UvLauncher::Unreaped(const std::string& job_id, int rank) const {
  auto job = live_.find(job_id);
  if (job == live_.end()) return nullptr;
  auto it = job->second.find(rank);
  if (it == job->second.end() || !NotReaped(it->second->pidfd)) return nullptr;
  return it->second;
}

std::string UvLauncher::KernelView(const std::string& job_id, int rank) {
  Child* child = Unreaped(job_id, rank);
  if (child == nullptr) return "";
  const std::optional<ProcDir> dir = ProcDir::Open(child->pid, child->pidfd.get());
  return dir ? KernelViewOf(dir->path(), child->pid) : "";
}

absl::StatusOr<std::string> UvLauncher::ReadStackPipe(const std::string& job_id, int rank) {
  Child* child = Unreaped(job_id, rank);
  if (child == nullptr || !child->stack.valid()) return absl::NotFoundError("the rank is gone");
  std::string out;
  char buf[16384];
  while (out.size() < kStackPipeBytes) {
    const ssize_t n = read(child->stack.get(), buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN: nothing more now; 0: every writer is gone
  }
  return out;
}

std::optional<StuckProcess> UvLauncher::Stuck(const std::string& job_id, int rank) {
  Child* child = Unreaped(job_id, rank);
  if (child == nullptr) return std::nullopt;
  // Through the pidfd held from spawn: the rank's own /proc.
  const std::optional<ProcDir> dir = ProcDir::Open(child->pid, child->pidfd.get());
  if (!dir) return std::nullopt;
  const std::optional<ProcEntry> entry = ReadProcEntry(*dir);
  if (!entry) return std::nullopt;
  StuckProcess p;
  p.pid = child->pid;
  p.state = entry->state;
  p.start_time = entry->start_time;
  p.wchan = ReadWchan(*dir);
  p.kernel_stack = ReadKernelStack(*dir);
  return p;
}

std::vector<StuckProcess> UvLauncher::Leftovers(const std::string& job_id, size_t max) {
  // A pid the containment listed may be reused before it is read: each is
  // held (ProcDir), then the job's processes listed again; one still
  // listed while held is the job's, and everything read is of it.
  std::vector<std::pair<Containment::Left, ProcDir>> held;
  for (const Containment::Left& left : containment_->Remaining(job_id, max)) {
    if (auto dir = ProcDir::Open(left.pid)) held.emplace_back(left, std::move(*dir));
  }
  if (held.empty()) return {};
  std::set<pid_t> still;
  for (const Containment::Left& left : containment_->Remaining(job_id, max)) still.insert(left.pid);
  std::vector<StuckProcess> out;
  for (const auto& [left, dir] : held) {
    if (still.count(left.pid) == 0 || !dir.Alive()) continue;
    const std::optional<ProcEntry> entry = ReadProcEntry(dir);
    // Gone meanwhile, or a zombie the reaper takes on its next turn.
    if (!entry || entry->state == 'Z' || entry->state == 'X') continue;
    StuckProcess p;
    p.pid = left.pid;
    p.rank = left.rank;
    p.state = entry->state;
    p.start_time = entry->start_time;
    p.wchan = ReadWchan(dir);
    p.kernel_stack = ReadKernelStack(dir);
    out.push_back(std::move(p));
  }
  return out;
}

void UvLauncher::Abandon(const std::string& job_id) {
  containment_->Forget(job_id);
  auto job = live_.find(job_id);
  if (job == live_.end()) return;
  // Reaped when they go, as every child; nobody hears of it.
  for (auto& [rank, child] : job->second) {
    child->callbacks.on_output = [](Stream, std::string_view) {};
    child->callbacks.on_control = [](std::string_view) {};
    child->callbacks.on_exit = [](ExitStatus) {};
  }
}

void UvLauncher::SignalRank(const std::string& job_id, int rank, int sig) {
  // kill() right after the check, on the one thread that reaps: the group
  // number cannot change hands in between.
  if (Child* child = Unreaped(job_id, rank)) SignalGroup(child->pid, child->pidfd, sig);
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

std::optional<uint64_t> UvLauncher::MainThreadCpu(const std::string& job_id, int rank) {
  // Not reaped: the number is still the rank's (a zombie's stat reads too).
  Child* child = Unreaped(job_id, rank);
  if (child == nullptr) return std::nullopt;
  auto entry = ReadMainThreadEntry(child->pid);
  if (!entry) return std::nullopt;
  return entry->cpu_ticks;
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

void UvLauncher::OffLoop(std::function<void()> work, std::function<void()> after) {
  struct Work {
    uv_work_t req;
    std::function<void()> work, after;
  };
  auto* w = new Work{{}, std::move(work), std::move(after)};
  w->req.data = w;
  const int rc = uv_queue_work(
      loop_, &w->req, [](uv_work_t* req) { static_cast<Work*>(req->data)->work(); },
      [](uv_work_t* req, int) {
        std::unique_ptr<Work> done(static_cast<Work*>(req->data));
        done->after();
      });
  if (rc != 0) {
    // Only for a loop that is closing: the work is done here, late rather
    // than never.
    spdlog::error("uv_queue_work: {}; running it on the loop", uv_strerror(rc));
    std::unique_ptr<Work> done(w);
    done->work();
    done->after();
  }
}

}  // namespace ltd
