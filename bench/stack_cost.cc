// Takes the stacks of the given pids as a hung job's investigation does
// (process/stack_sampler.h: every pid at once, eu-stack else gdb, through
// lt-exec), and prints how long it took and what became of each:
//   stack_cost LT_EXEC BUDGET_MS PID...
// A benchmark's helper (bench/hang_truth_bench.py), not a test.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stack_sampler.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LT_EXEC BUDGET_MS PID...\n", argv[0]);
    return 2;
  }
  std::vector<pid_t> pids;
  for (int i = 3; i < argc; ++i) pids.push_back(static_cast<pid_t>(std::atoi(argv[i])));
  const auto start = std::chrono::steady_clock::now();
  const auto stacks = ltd::TakeStacks(ltd::StackTools::Installed(), argv[1],
                                      ltd::Credentials{geteuid(), getegid(), {}}, pids,
                                      ltd::Millis(std::atol(argv[2])));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  int taken = 0;
  for (const auto& s : stacks) taken += s.outcome == ltd::SampledStack::Outcome::kTaken;
  std::printf("%.1f ms %d/%zu taken\n", ms, taken, stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i)
    std::printf("pid %d: %s\n", pids[i], stacks[i].note.c_str());
  return 0;
}
