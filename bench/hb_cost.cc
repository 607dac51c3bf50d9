// The cost of one heartbeat from a rank: lt_heartbeat_step() into a
// socketpair whose other end a thread drains, as ltd would. Prints the
// median per call over batches, and the cost with no ltd (a no-op).
//
// libltworker reads LT_HEARTBEAT_FD once per process, so the enabled path
// is measured in a re-executed copy of this program that inherits fd 3.
#include <fcntl.h>
#include <ltworker/ltworker.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

double MedianNsPerCall(int batches, int calls) {
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) lt_heartbeat_step(static_cast<int64_t>(b) * calls + i);
    const auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
    // Let the reader catch up, so every batch sees an empty buffer as a
    // rank beating once per step would.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--enabled") == 0) {
    if (!lt_enabled()) return 2;
    std::printf("%-48s %9.1f ns\n", "libltworker: one lt_heartbeat_step call",
                MedianNsPerCall(2000, 100));
    return 0;
  }
  unsetenv("LT_HEARTBEAT_FD");
  const double disabled = MedianNsPerCall(200, 1000);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("hb_cost: socketpair");
    return 1;
  }
  std::thread drain([fd = sv[1]] {
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0) {
    }
  });
  const pid_t pid = fork();
  if (pid == 0) {
    // fd 3 without close-on-exec (dup2 onto itself would keep the flag).
    if (sv[0] == 3) {
      fcntl(3, F_SETFD, 0);
    } else {
      dup2(sv[0], 3);
    }
    setenv("LT_HEARTBEAT_FD", "3", 1);
    execl("/proc/self/exe", argv[0], "--enabled", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(sv[0]);  // the reader sees EOF once the child's copy is gone too
  drain.join();
  close(sv[1]);
  std::printf("%-48s %9.1f ns\n", "libltworker: one call with no ltd (no-op)", disabled);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
