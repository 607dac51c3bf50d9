#include "guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// A guardian that keeps dying is not restarted forever.
constexpr int kMaxRestarts = 5;
// The clean-stop message: the guardian still sweeps, but quietly.
constexpr char kCleanStop = 'x';

}  // namespace

struct Guardian::Proc {
  uv_process_t handle{};
  Guardian* owner = nullptr;  // null once ltd let go of it
};

absl::StatusOr<std::unique_ptr<Guardian>> Guardian::Start(uv_loop_t* loop, std::string binary,
                                                          std::vector<std::string> args) {
  std::unique_ptr<Guardian> g(new Guardian(loop, std::move(binary), std::move(args)));
  if (absl::Status s = g->Spawn(); !s.ok()) return s;
  return g;
}

Guardian::Guardian(uv_loop_t* loop, std::string binary, std::vector<std::string> args)
    : loop_(loop), binary_(std::move(binary)), args_(std::move(args)) {}

pid_t Guardian::pid() const { return proc_ != nullptr ? proc_->handle.pid : 0; }

absl::Status Guardian::Spawn() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return absl::InternalError(Cat("pipe2: ", std::strerror(errno)));
  Fd read_end(p[0]);
  write_end_.reset(p[1]);

  std::vector<std::string> argv = {binary_, "--ltd-pid", std::to_string(getpid())};
  argv.insert(argv.end(), args_.begin(), args_.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_INHERIT_FD;  // the pipe, as its stdin
  stdio[0].data.fd = read_end.get();
  stdio[1].flags = UV_IGNORE;
  stdio[2].flags = UV_INHERIT_FD;  // ltd's stderr, so its words reach the journal
  stdio[2].data.fd = STDERR_FILENO;
  uv_process_options_t options{};
  options.file = cargv[0];
  options.args = cargv.data();
  options.stdio = stdio;
  options.stdio_count = 3;
  options.flags = UV_PROCESS_DETACHED;  // setsid: out of ltd's terminal's reach
  options.exit_cb = [](uv_process_t* h, int64_t exit_status, int term_signal) {
    auto* proc = static_cast<Proc*>(h->data);
    Guardian* owner = proc->owner;
    uv_close(reinterpret_cast<uv_handle_t*>(h),
             [](uv_handle_t* h) { delete static_cast<Proc*>(h->data); });
    if (owner != nullptr) owner->OnExit(exit_status, term_signal);
  };
  auto* proc = new Proc;
  proc->owner = this;
  proc->handle.data = proc;
  if (int rc = uv_spawn(loop_, &proc->handle, &options); rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&proc->handle),
             [](uv_handle_t* h) { delete static_cast<Proc*>(h->data); });
    write_end_.reset();
    return absl::UnavailableError(Cat("cannot start ", binary_, ": ", uv_strerror(rc)));
  }
  proc_ = proc;
  spdlog::debug("guardian pid={} started", proc->handle.pid);
  return absl::OkStatus();
}

void Guardian::OnExit(int64_t exit_status, int term_signal) {
  const pid_t dead = proc_ != nullptr ? proc_->handle.pid : 0;
  proc_ = nullptr;
  write_end_.reset();
  if (restarts_ >= kMaxRestarts) {
    spdlog::critical(
        "guardian pid={} exited (status {}, signal {}) {} times; not restarting it: if ltd dies "
        "now, processes of its jobs may survive it",
        dead, exit_status, term_signal, restarts_ + 1);
    return;
  }
  ++restarts_;
  spdlog::error("guardian pid={} exited (status {}, signal {}); restarting it", dead, exit_status,
                term_signal);
  if (absl::Status s = Spawn(); !s.ok()) spdlog::critical("guardian: {}", std::string(s.message()));
}

Guardian::~Guardian() {
  if (proc_ == nullptr) return;
  const pid_t pid = proc_->handle.pid;
  // Take the process out of libuv's hands first: from here on this
  // destructor waits for it, and libuv must not.
  proc_->owner = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&proc_->handle),
           [](uv_handle_t* h) { delete static_cast<Proc*>(h->data); });
  proc_ = nullptr;
  if (write(write_end_.get(), &kCleanStop, 1) != 1) {
    spdlog::warn("guardian pid={}: write: {}", pid, std::strerror(errno));
  }
  write_end_.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const pid_t rc = waitpid(pid, nullptr, WNOHANG);
    if (rc == pid || (rc < 0 && errno != EINTR)) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  spdlog::warn("guardian pid={} did not exit within 5s of ltd stopping; killing it", pid);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace ltd
