#include "stack_sampler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "exec_shim_args.h"
#include "exec_spec.h"
#include "fd.h"
#include "spawn_attr.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// At most this many gdbs at once; a bigger job gets stacks for its first
// ranks (the stalled ones come first), and the budget holds regardless.
constexpr size_t kMaxConcurrentGdb = 16;
constexpr size_t kMaxStackBytes = 64 * 1024;

struct GdbSetup {
  std::string gdb;        // its path; empty when gdb is not installed
  std::string exec_shim;  // lt-exec
  uid_t uid = 0;          // whose ranks they are
  gid_t gid = 0;
  std::vector<gid_t> groups;  // LoginGroups(uid, gid)
};

struct Gdb {
  size_t index = 0;
  pid_t child = -1;
  Fd out;
  std::string text;
};

// Starts `gdb --batch -p PID` printing every thread's backtrace, as the
// rank's own user: gdb reads the rank's binary and libraries, which the
// user controls, and must not do so as root. lt-exec drops to the user
// (it is what ranks start through too). About a second of CPU for a
// LibTorch process, most of it reading symbols.
bool StartGdb(const GdbSetup& setup, pid_t pid, Gdb& g) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  Fd rd(p[0]), wr(p[1]);
  // Low fds may be free in a supervisor (a rank's pipes closed): gdb's
  // stdout must not be a spawn target that an earlier dup2 overwrites.
  if (!AboveSpawnFds(wr).ok()) return false;
  auto spec = WriteExecSpec("/",
                            {setup.gdb, "--batch", "--nx", "-iex", "set auto-load off", "-iex",
                             "set debuginfod enabled off", "-p", std::to_string(pid), "-ex",
                             "set pagination off", "-ex", "set print frame-arguments none", "-ex",
                             "set print address off", "-ex", "thread apply all bt 30"},
                            {"PATH=/usr/bin:/bin", "LANG=C"});
  if (!spec.ok()) return false;
  std::vector<std::string> argv = {setup.exec_shim};
  AppendUserArgs(setup.uid, setup.gid, &setup.groups, argv);
  std::vector<char*> cargv = CStrings(argv);
  char* no_env[] = {nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 3);  // where lt-exec says it failed
  posix_spawn_file_actions_adddup2(&fa, spec->get(), kExecSpecFd);
  // Spawned from a libuv pool thread, which blocks every signal: gdb needs
  // SIGCHLD and friends back.
  const CleanSpawnAttr attr(/*new_session=*/false);
  pid_t child = -1;
  const int rc = posix_spawn(&child, cargv[0], &fa, attr.get(), cargv.data(), no_env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  g.child = child;
  g.out = std::move(rd);
  return true;
}

// Keeps the frames and thread headers, drops gdb's chatter, and puts the
// main thread (gdb's "Thread 1", printed last) first: that is where a
// training loop stands.
std::string Frames(const std::string& out) {
  std::vector<std::string> threads;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string_view line(out.data() + start, end - start);
    start = end + 1;
    if (line.starts_with("Thread ") || (threads.empty() && line.starts_with("#")))
      threads.emplace_back();
    if (line.starts_with("#") || line.starts_with("Thread ")) {
      threads.back().append(line);
      threads.back().push_back('\n');
    }
  }
  std::stable_partition(threads.begin(), threads.end(),
                        [](const std::string& t) { return t.starts_with("Thread 1 "); });
  std::string frames;
  for (const std::string& t : threads) frames += t;
  return frames;
}

// Runs gdb on every non-zero pid at once, all within `budget`.
std::vector<std::string> GdbStacks(const GdbSetup& setup, const std::vector<pid_t>& pids,
                                   Millis budget) {
  std::vector<std::string> stacks(pids.size());
  std::vector<Gdb> running;
  for (size_t i = 0; i < pids.size() && running.size() < kMaxConcurrentGdb; ++i) {
    if (pids[i] <= 0) continue;
    Gdb g;
    g.index = i;
    if (StartGdb(setup, pids[i], g)) running.push_back(std::move(g));
  }
  const auto deadline = std::chrono::steady_clock::now() + budget;
  char buf[8192];
  size_t open = running.size();
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::vector<pollfd> fds;
    for (const Gdb& g : running) fds.push_back({g.out.get(), POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;  // SIGCHLD from a gdb that finished
    if (ready <= 0) break;
    for (size_t k = 0; k < running.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      Gdb& g = running[k];
      if (n > 0) {
        if (g.text.size() < kMaxStackBytes) g.text.append(buf, static_cast<size_t>(n));
      } else {
        g.out.reset();  // done (or broken): stop polling it
        --open;
      }
    }
  }
  for (Gdb& g : running) {
    // Still talking past the budget: stop it. One that closed its output
    // has exited and may already be reaped (by the subreaper's sweep), so
    // its pid is not ours to signal any more.
    if (g.out.valid()) kill(g.child, SIGKILL);
    int status = 0;
    waitpid(g.child, &status, 0);
    stacks[g.index] = Frames(g.text);
    if (stacks[g.index].empty()) {
      spdlog::debug("gdb gave no stack for pid {} (wait status {:#x}): {}", pids[g.index], status,
                    g.text.substr(0, 500));
    }
  }
  return stacks;
}

struct SampleWork {
  uv_work_t req{};
  GdbSetup setup;
  std::vector<pid_t> pids;
  Millis budget{0};
  std::vector<std::string> stacks;
  std::function<void(std::vector<std::string>)> done;
  std::weak_ptr<int> sampler_alive;
};

}  // namespace

bool IsPythonProcess(pid_t pid) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && exe.filename().string().starts_with("python");
}

UvStackSampler::UvStackSampler(uv_loop_t* loop, std::string exec_shim)
    : loop_(loop), exec_shim_(std::move(exec_shim)) {
  for (const char* path : {"/usr/bin/gdb", "/usr/local/bin/gdb"}) {
    if (access(path, X_OK) == 0) {
      gdb_ = path;
      break;
    }
  }
}

void UvStackSampler::Sample(const std::vector<pid_t>& pids, uid_t uid, gid_t gid, Millis budget,
                            std::function<void(std::vector<std::string>)> done) {
  auto* work = new SampleWork;
  work->req.data = work;
  work->setup = GdbSetup{gdb_, exec_shim_, uid, gid, {}};
  work->pids = pids;
  work->budget = budget;
  work->done = std::move(done);
  work->sampler_alive = alive_;
  uv_queue_work(
      loop_, &work->req,
      [](uv_work_t* req) {
        auto* w = static_cast<SampleWork*>(req->data);
        if (!w->setup.gdb.empty()) {
          // NSS may be slow (LDAP): here, off the loop.
          if (w->setup.uid != geteuid() || w->setup.gid != getegid())
            w->setup.groups = LoginGroups(w->setup.uid, w->setup.gid);
          w->stacks = GdbStacks(w->setup, w->pids, w->budget);
        }
        w->stacks.resize(w->pids.size());
      },
      [](uv_work_t* req, int) {
        auto* w = static_cast<SampleWork*>(req->data);
        if (!w->sampler_alive.expired()) w->done(std::move(w->stacks));
        delete w;
      });
}

}  // namespace ltd
