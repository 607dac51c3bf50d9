#include "admin_program.h"

#include <signal.h>
#include <unistd.h>

#include "spdlog/spdlog.h"

namespace ltd {

struct AdminProgram::Instance {
  AdminProgram* owner = nullptr;
  std::string what;
  int pid = 0;
  bool exited = false;
  // Declared after `timer`: destroyed (closed) first, so no exit callback
  // comes for an Instance being freed.
  UvPtr<uv_timer_t> timer;
  UvPtr<uv_process_t> process;
};

AdminProgram::AdminProgram(uv_loop_t* loop, std::string path, std::chrono::milliseconds deadline)
    : loop_(loop), path_(std::move(path)), deadline_(deadline) {}

AdminProgram::~AdminProgram() {
  for (const auto& [raw, run] : runs_) {
    if (!run->exited && run->pid > 0) kill(-run->pid, SIGKILL);
  }
}

void AdminProgram::Run(const std::vector<std::string>& env, const std::string& what) {
  if (path_.empty()) return;
  auto run = std::make_unique<Instance>();
  run->owner = this;
  run->what = what;
  std::vector<std::string> strings = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  strings.insert(strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string file = path_;
  char* args[] = {file.data(), nullptr};
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = STDERR_FILENO;  // ltd's log
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = STDERR_FILENO;
  uv_process_options_t options{};
  options.file = file.c_str();
  options.args = args;
  options.env = envp.data();
  options.stdio_count = 3;
  options.stdio = stdio;
  options.flags = UV_PROCESS_DETACHED;  // a session and process group of its own
  options.exit_cb = [](uv_process_t* p, int64_t status, int signal) {
    auto* run = static_cast<Instance*>(p->data);
    if (run != nullptr) run->owner->Exited(run, status, signal);
  };
  int rc = 0;
  run->process = UvInit<uv_process_t>([&](uv_process_t* p) {
    p->data = run.get();
    rc = uv_spawn(loop_, p, &options);
    return 0;  // a failed uv_spawn's handle is initialized all the same, and closed
  });
  if (rc != 0) {
    spdlog::error("{}: cannot start {}: {}", what, path_, uv_strerror(rc));
    return;  // `run` goes, closing the handle
  }
  run->pid = run->process->pid;
  spdlog::info("{}: started {} (pid {})", what, path_, run->pid);
  run->timer = UvInit<uv_timer_t>([&](uv_timer_t* t) { return uv_timer_init(loop_, t); });
  if (run->timer) {
    run->timer->data = run.get();
    uv_timer_start(
        run->timer.get(),
        [](uv_timer_t* t) {
          auto* run = static_cast<Instance*>(t->data);
          spdlog::warn("{}: {} still runs at its deadline; killed", run->what, run->owner->path_);
          kill(-run->pid, SIGKILL);  // not reaped yet: its group is still its own
        },
        static_cast<uint64_t>(deadline_.count()), 0);
  }
  runs_[run.get()] = std::move(run);
}

void AdminProgram::Exited(Instance* run, int64_t status, int signal) {
  run->exited = true;
  if (signal != 0) {
    spdlog::warn("{}: {} died of signal {}", run->what, path_, signal);
  } else {
    spdlog::log(status == 0 ? spdlog::level::info : spdlog::level::warn, "{}: {} exited with {}",
                run->what, path_, status);
  }
  runs_.erase(run);  // closes its handles
}

}  // namespace ltd
