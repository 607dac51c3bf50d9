// A rank written in C++ against libltworker's C++ API.
#include <chrono>
#include <cstdio>
#include <ltworker/ltworker.hpp>
#include <thread>

int main() {
  if (!ltworker::Enabled()) return 10;
  for (int64_t step = 0; step < 7; ++step) {
    ltworker::Heartbeat(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ltworker::ReportError("cpp_rank: checkpoint write failed: No space left on device");
  return 3;
}
