// What removing a pruned job's dir costs the remover thread: RemoveTree
// (store/dir_remover.h: its own mount alone, a mount in it detached) beside
// std::filesystem::remove_all (what the remover used before), in turns,
// over dirs laid out as a finished job leaves its dir:
//   remove_cost DIR [DIRS_A_RUN] [RUNS]
// Prints the median CPU microseconds a dir of each. A benchmark, not a test.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dir_remover.h"

namespace {

// The record, the log, the lock, errors.kept with three files, and the
// errors/ mount point left empty.
void MakeJobDir(const std::string& dir) {
  std::filesystem::create_directories(dir + "/errors");
  std::filesystem::create_directories(dir + "/errors.kept");
  for (const char* name : {"job.json", "log.head", "supervisor.lock"}) {
    std::ofstream(dir + "/" + name) << std::string(2000, 'x');
  }
  for (int i = 0; i < 3; ++i) {
    std::ofstream(dir + "/errors.kept/error-" + std::to_string(i) + ".json") << "{}";
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [DIRS_A_RUN] [RUNS]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int n = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  std::vector<double> before, now;
  for (int run = 0; run < runs; ++run) {
    for (bool tree : {false, true}) {
      for (int i = 0; i < n; ++i) MakeJobDir(root + "/" + std::to_string(i));
      sync();
      const std::clock_t start = std::clock();
      for (int i = 0; i < n; ++i) {
        const std::string dir = root + "/" + std::to_string(i);
        if (tree) {
          ltd::RemoveTree(dir);
        } else {
          std::error_code ec;
          std::filesystem::remove_all(dir, ec);
        }
      }
      const double us = double(std::clock() - start) / CLOCKS_PER_SEC * 1e6 / n;
      (tree ? now : before).push_back(us);
    }
  }
  std::printf("CPU a job dir, medians of %d x %d: remove_all %.1f us, RemoveTree %.1f us\n", runs,
              n, Median(before), Median(now));
  return 0;
}
