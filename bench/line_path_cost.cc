// line_path_cost: what a supervisor spends per output line, before and
// after the issue-23 additions: a stamp on every chunk of lines in the
// job's log (`ltctl logs --timestamps`) and a copy into the user's
// --output file. It runs the per-line path of JobRunner::OnOutput
// (supervisor/rank_events.cc) on its own: the chunk cut into lines, each
// stored after its prefix, one append to the job's log, and the --output
// write, with the real LineSplitter, LogStamp, JobLogWriter and OutputFiles
// (whose writer, lt-userio, is a process of its own: its CPU is counted).
//
// Two rank shapes: a fast printer (a pipe read brings 64 KiB of lines) and
// a rank that flushes every line (one line a read: the stamp's worst case).
// Prints the median lines per CPU second (the supervisor's own user and
// system time: what the path costs it, not how fast the disk takes the
// bytes, which on a loaded machine throttles the bigger writes) of several
// runs per variant, and the ratios to the variant without either. Not a
// test: nothing is asserted.
//
// Usage: build/bench/line_path_cost [RUNS] [LINES]
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "helper_reaper.h"
#include "job_log.h"
#include "line_splitter.h"
#include "output_files.h"
#include "str_util.h"
#include "user_io.h"

namespace {

using ltd::Cat;

enum class Variant { kBefore, kStamps, kStampsAndOutput };
const char* Name(Variant v) {
  switch (v) {
    case Variant::kBefore:
      return "prefix only (before)";
    case Variant::kStamps:
      return "with timestamps";
    case Variant::kStampsAndOutput:
      return "timestamps + --output file";
  }
  return "";
}

// This process's CPU and its reaped children's: the --output file's
// writer (lt-userio) is a child, reaped before the count is taken.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  rusage children{};
  getrusage(RUSAGE_CHILDREN, &children);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9 +
         secs(children.ru_utime) + secs(children.ru_stime);
}

// Lines per CPU second through the path for `lines` lines arriving `per_read` at a time.
double Run(Variant v, size_t lines, size_t per_read, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto log = ltd::JobLogWriter::Open(dir, uint64_t{1} << 40);
  if (!log.ok()) {
    std::fprintf(stderr, "line_path_cost: %s\n", std::string(log.status().message()).c_str());
    std::exit(1);
  }
  std::optional<ltd::OutputFiles> files;
  if (v == Variant::kStampsAndOutput) {
    ltd::Job job;
    job.id = "1";
    job.spec.devices = 4;  // rank 3 writes
    job.spec.uid = geteuid();
    job.spec.gid = getegid();
    job.spec.output = dir + "/out-%j-%r.log";
    ltd::UserIo user_io(LT_USERIO);
    auto f = ltd::OutputFiles::Open(job, true, &user_io);
    if (!f.ok()) {
      std::fprintf(stderr, "line_path_cost: %s\n", std::string(f.status().message()).c_str());
      std::exit(1);
    }
    files.emplace(std::move(*f));
  }
  const std::string line = "step 123456 loss 0.123456 lr 3.0e-04 tokens/s 123456.7 ok";
  std::string chunk;
  for (size_t i = 0; i < per_read; ++i) chunk.append(line).push_back('\n');
  ltd::LineSplitter splitter(64 * 1024);
  const int rank = 3;
  const double start = CpuSeconds();
  for (size_t done = 0; done < lines; done += per_read) {
    // As OnOutput: one prefix per chunk, the lines stored after it, one
    // append, then the copy.
    const std::string prefix =
        (v == Variant::kBefore ? std::string() : ltd::LogStamp(std::chrono::system_clock::now())) +
        Cat("[", rank, "] ");
    std::string stored;
    splitter.Feed(
        chunk, [&](std::string_view l, bool) { stored.append(prefix).append(l).push_back('\n'); });
    log->Append(stored);
    if (files) files->Write(rank, ltd::Stream::kStdout, stored, prefix.size());
  }
  // The writer thread's share too: its CPU counts once it has written all.
  const bool output = files.has_value();
  const uint64_t dropped = output ? files->dropped() : 0;
  files.reset();
  // The writer has exited; its CPU counts once the reaper has it. It may
  // still be writing for a while (the disk): a CPU second it spends after
  // the run would be counted in the next variant's.
  for (int i = 0; i < 30000 && ltd::HelperReaper::Get().alive(geteuid()) > 0; ++i) {
    usleep(1000);
  }
  const double secs = CpuSeconds() - start;
  struct stat st {};
  if (dropped > 0) {
    std::printf("    (%.1f%% of the --output file's bytes dropped: its writer fell behind)\n",
                100.0 * static_cast<double>(dropped) / static_cast<double>(lines * line.size()));
  } else if (output && (stat((dir + "/out-1-3.log").c_str(), &st) != 0 ||
                        static_cast<size_t>(st.st_size) < lines * line.size())) {
    std::fprintf(stderr, "line_path_cost: the --output file did not get every line\n");
    std::exit(1);
  }
  return static_cast<double>(lines) / secs;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const size_t lines =
      argc > 2 ? std::max<size_t>(1000, std::strtoull(argv[2], nullptr, 10)) : 1000000;
  char tmpl[] = "/tmp/line_path_cost.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = std::string(tmpl) + "/job";
  std::printf("per-line path of a supervisor: median of %d runs of %zu lines (60 bytes)\n", runs,
              lines);
  for (size_t per_read : {size_t{1092}, size_t{1}}) {
    std::printf("\n%s:\n", per_read == 1 ? "one line per read (a rank that flushes each line)"
                                         : "64 KiB per read (a fast printer)");
    const Variant variants[] = {Variant::kBefore, Variant::kStamps, Variant::kStampsAndOutput};
    std::vector<std::vector<double>> got(3);
    for (int r = 0; r < runs; ++r) {  // in turns, so that noise hits all alike
      for (size_t i = 0; i < 3; ++i) got[i].push_back(Run(variants[i], lines, per_read, dir));
    }
    const double base = Median(got[0]);
    for (size_t i = 0; i < 3; ++i) {
      const double m = Median(got[i]);
      std::printf("  %-28s %12.0f lines/CPU-s  %.2fx\n", Name(variants[i]), m, m / base);
    }
  }
  std::filesystem::remove_all(tmpl);
  return 0;
}
