#include "hang_report.h"

#include <algorithm>
#include <array>
#include <vector>

#include "duration.h"
#include "str_util.h"

namespace ltd {
namespace {

// One thread of a stack dump, innermost frame first; or a Python
// traceback the rank was printing when its stack was taken.
struct Thread {
  bool current = false;    // faulthandler's "Current thread": took the signal
  bool traceback = false;  // "Traceback (most recent call last):"
  std::vector<std::string_view> frames;
};

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

template <size_t N>
bool ContainsAny(std::string_view text, const std::array<std::string_view, N>& parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](std::string_view p) { return Contains(text, p); });
}

// Both formats list the innermost frame first: faulthandler ("Thread
// 0x...", "Current thread 0x...", then `  File "...", line N in f`) and
// gdb ("Thread N (...)", then "#0 ..."); gdb's main thread is "Thread 1",
// which the sampler puts first. A Python traceback printed just before
// faulthandler's dump (`  File "...", line N, in f`, innermost last) is
// kept apart, as one.
std::vector<Thread> ParseThreads(std::string_view stack) {
  std::vector<Thread> threads;
  for (std::string_view line : Split(stack, '\n')) {
    const size_t text = line.find_first_not_of(' ');
    if (text == std::string_view::npos) continue;
    line.remove_prefix(text);
    if (line.starts_with("Thread ") || line.starts_with("Current thread ") ||
        line.starts_with("Traceback (most recent call last)")) {
      threads.emplace_back();
      threads.back().current = line.starts_with("Current thread ");
      threads.back().traceback = line.starts_with("Traceback ");
    } else if (line.starts_with("File \"") || line.starts_with("#")) {
      if (threads.empty()) threads.emplace_back();
      threads.back().frames.push_back(line);
    }
  }
  return threads;
}

// The thread that runs the training loop. gdb: Thread 1. faulthandler
// names no main thread; the one whose outermost frame is a script's
// `<module>` runs the program, else the one that took the signal.
const Thread* MainThread(const std::vector<Thread>& threads) {
  for (const Thread& t : threads) {
    if (!t.traceback && !t.frames.empty() && t.frames.back().starts_with("File \"") &&
        t.frames.back().ends_with(" in <module>"))
      return &t;
  }
  for (const Thread& t : threads) {
    if (t.current) return &t;
  }
  for (const Thread& t : threads) {
    if (!t.traceback && !t.frames.empty()) return &t;
  }
  return nullptr;
}

// What a stack shows of its rank. kWhere: the main thread's frames, which
// say where it is. kNoFrame: no frame of the main thread (faulthandler's
// dump while Python collects garbage is "Garbage-collecting" and "<no
// Python frame>" for the thread that collects, and nothing of the others).
// kFailing: the rank handling an uncaught exception: Python was printing a
// traceback when the dump came, or the main thread runs sys.excepthook,
// which only the interpreter calls (its outermost frame, with whatever the
// hook called inside it). Seen in multi-node runs under load: a rank whose
// allreduce failed when another node tore its ranks down, caught on its
// way out. Where it stopped is not in such a stack: the traceback is cut
// short by the dump, and the main thread is only reporting.
enum class Shows { kWhere, kNoFrame, kFailing };

Shows Read(std::string_view stack) {
  const std::vector<Thread> threads = ParseThreads(stack);
  if (std::any_of(threads.begin(), threads.end(), [](const Thread& t) { return t.traceback; }))
    return Shows::kFailing;
  const Thread* main = MainThread(threads);
  if (main == nullptr || main->frames.empty()) return Shows::kNoFrame;
  const std::string_view outermost = main->frames.back();
  return outermost.starts_with("File \"") && outermost.ends_with(" in excepthook") ? Shows::kFailing
                                                                                   : Shows::kWhere;
}

// Frames of the wait primitives every blocked thread shows, whatever it
// waits for: they say nothing about what the rank is doing.
bool IsWaitPrimitive(std::string_view frame) {
  static constexpr std::array<std::string_view, 14> kRuntime = {
      "libc.so",         "libpthread", "libstdc++",    "ld-linux",
      "__futex",         "futex_wait", "pthread_cond", "pthread_join",
      "__GI_",           "syscall ()", "__gthread",    "std::condition_variable",
      "clock_nanosleep", "in ?? ()"};
  return ContainsAny(frame, kRuntime);
}

// Frames of a rank waiting for its peers. In Python, DDP's gradient
// allreduce runs inside backward(), so autograd's frames count too.
bool IsCollective(std::string_view frame) {
  static constexpr std::array<std::string_view, 12> kMarkers = {"c10d::",
                                                                "gloo::",
                                                                "nccl",
                                                                "NCCL",
                                                                "ProcessGroup",
                                                                "cudaStreamSynchronize",
                                                                "cudaDeviceSynchronize",
                                                                "torch/distributed/",
                                                                "nn/parallel/distributed.py",
                                                                "torch/autograd/",
                                                                "_functional_collectives",
                                                                "/c10d/"};
  return ContainsAny(frame, kMarkers);
}

// The innermost collective frame of the main thread, for humans: a Python
// frame as "fn (file.py:N)", a native one as gdb printed it.
std::string CollectiveFrame(std::string_view stack) {
  const std::vector<Thread> threads = ParseThreads(stack);
  const Thread* main = MainThread(threads);
  if (main == nullptr) return "";
  for (std::string_view frame : main->frames) {
    if (IsWaitPrimitive(frame) || !IsCollective(frame)) continue;
    if (frame.starts_with("File \"")) {
      const size_t close = frame.find('"', 6);
      const size_t line = frame.find(", line ");
      const size_t in = frame.rfind(" in ");
      if (close != std::string_view::npos && line != std::string_view::npos &&
          in != std::string_view::npos && in > line) {
        std::string_view file = frame.substr(6, close - 6);
        file = file.substr(file.rfind('/') + 1);
        return Cat(frame.substr(in + 4), " (", file, ":", frame.substr(line + 7, in - line - 7),
                   ")");
      }
    }
    return std::string(frame);
  }
  return "";
}

}  // namespace

bool WaitsInCollective(std::string_view stack) {
  const std::vector<Thread> threads = ParseThreads(stack);
  const Thread* main = MainThread(threads);
  if (main == nullptr) return false;
  for (std::string_view frame : main->frames) {
    if (IsWaitPrimitive(frame)) continue;
    return IsCollective(frame);
  }
  return false;
}

int SingledOut(std::vector<std::pair<std::chrono::milliseconds, int>> stops,
               std::chrono::milliseconds noise) {
  if (stops.empty()) return -1;
  std::sort(stops.begin(), stops.end());
  if (stops.size() == 1) return stops.front().second;
  return stops[1].first - stops[0].first > noise ? stops.front().second : -1;
}

std::string DescribeTie(std::vector<std::pair<std::chrono::milliseconds, int>> stops,
                        std::chrono::milliseconds noise) {
  if (stops.empty()) return "";
  std::sort(stops.begin(), stops.end());
  std::vector<int> tied;
  std::chrono::milliseconds last = stops.front().first;
  for (const auto& [at, rank] : stops) {
    if (at - stops.front().first > noise) break;
    tied.push_back(rank);
    last = at;
  }
  if (tied.size() == 1) return Cat(RankSet(tied), " stopped beating first");
  return Cat(RankSet(tied), " stopped beating within ", (last - stops.front().first).count(),
             "ms of each other");
}

std::string RankSet(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return "no rank";
  if (ranks.size() == 1) return Cat("rank ", ranks.front());
  const bool run =
      ranks.size() > 2 && ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size());
  if (run) return Cat("ranks ", ranks.front(), "-", ranks.back());
  std::string out = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += Cat(i == 0 ? "" : ", ", ranks[i]);
  return out;
}

namespace {

// Taken (or, in a record that does not say, present).
bool Present(const HangReportRank& r) {
  return !r.stack.empty() &&
         (r.stack_status == StackStatus::kTaken || r.stack_status == StackStatus::kUnknown);
}

}  // namespace

bool StackIsEvidence(const HangReportRank& r) {
  return Present(r) && Read(r.stack) == Shows::kWhere;
}

std::string MissingStacks(const HangReport& report, std::chrono::milliseconds budget) {
  std::vector<int> late, frameless, collecting, failing;
  std::vector<std::pair<int, std::string>> other;  // rank, why
  for (const HangReportRank& r : report.ranks) {
    if (StackIsEvidence(r)) continue;
    if (r.stack_status == StackStatus::kTimedOut) {
      late.push_back(r.rank);
    } else if (Present(r) && Read(r.stack) == Shows::kFailing) {
      failing.push_back(r.rank);
    } else if (Present(r)) {
      (Contains(r.stack, "Garbage-collecting") ? collecting : frameless).push_back(r.rank);
    } else {
      other.emplace_back(
          r.rank, r.stack_note.empty() ? std::string(ToString(r.stack_status)) : r.stack_note);
    }
  }
  std::string out;
  if (!late.empty()) {
    const std::string set = RankSet(late);
    out = Cat("stack", late.size() > 1 ? "s" : "", " of ", set, " not taken in the ",
              FormatDuration(budget), " budget");
  }
  // Ranks that share a reason are listed together.
  std::vector<std::pair<std::string, std::vector<int>>> by_why;
  for (const auto& [rank, why] : other) {
    auto it =
        std::find_if(by_why.begin(), by_why.end(), [&](const auto& e) { return e.first == why; });
    if (it == by_why.end()) {
      by_why.push_back({why, {rank}});
    } else {
      it->second.push_back(rank);
    }
  }
  for (const auto& [why, ranks] : by_why) {
    out += Cat(out.empty() ? "stack" : "; stack", ranks.size() > 1 ? "s" : "", " of ",
               RankSet(ranks), " not taken (", why, ")");
  }
  auto none_shown = [&](const std::vector<int>& ranks, std::string_view why) {
    if (ranks.empty()) return;
    out += Cat(out.empty() ? "stack" : "; stack", ranks.size() > 1 ? "s" : "", " of ",
               RankSet(ranks), ranks.size() > 1 ? " show" : " shows", " no frame of ",
               ranks.size() > 1 ? "their" : "its", " main thread", why);
  };
  none_shown(collecting, ", taken while Python collected garbage");
  none_shown(frameless, "");
  if (!failing.empty()) {
    const bool many = failing.size() > 1;
    out += Cat(out.empty() ? "stack" : "; stack", many ? "s" : "", " of ", RankSet(failing),
               many ? " show them" : " shows it", " handling an uncaught exception, not where ",
               many ? "they" : "it", " stopped");
  }
  return out;
}

int AttributeHang(HangReport& report, bool peers_wait) {
  // Only meaningful when the ranks that missed their deadline wait in a
  // collective: then they wait for a peer, and the peers whose stacks show
  // no collective are the ones that stopped, whatever their deadlines said.
  bool stalled_wait = false;
  std::vector<int> culprits;
  for (HangReportRank& r : report.ranks) {
    r.in_collective = StackIsEvidence(r) && WaitsInCollective(r.stack);
    if (r.stalled && r.in_collective) stalled_wait = true;
    if (StackIsEvidence(r) && !r.in_collective) culprits.push_back(r.rank);
  }
  if (!(stalled_wait || peers_wait) || culprits.empty()) return -1;
  for (HangReportRank& r : report.ranks) {
    r.stalled = std::find(culprits.begin(), culprits.end(), r.rank) != culprits.end();
  }
  report.stalled_ranks = culprits;
  return culprits.front();
}

std::string DescribeCollectiveWaits(const HangReport& report) {
  std::vector<std::pair<int, std::string>> waits;
  for (const HangReportRank& r : report.ranks) {
    if (!StackIsEvidence(r)) continue;
    if (!r.in_collective) return "";
    waits.emplace_back(r.rank, CollectiveFrame(r.stack));
  }
  if (waits.size() < 2) return "";
  // Ranks in the same collective wait at the same frame; its line is part
  // of it, so two different calls of one collective differ too.
  bool same = true;
  for (const auto& [rank, frame] : waits) same = same && frame == waits.front().second;
  if (same) {
    return Cat("every rank waits in the same collective, ", waits.front().second,
               ", for a peer that never joins it (a deadlock)");
  }
  std::string out = "every rank waits in a collective and they disagree (a mismatch):";
  for (size_t i = 0; i < waits.size(); ++i) {
    out += Cat(i == 0 ? " " : ", ", "rank ", waits[i].first, " in ", waits[i].second);
  }
  return out;
}

std::string AutoStackText(std::string_view frames) {
  std::string out = "Thread (main; sent by ltd's automatic heartbeats, most recent call first):\n";
  for (std::string_view frame : Split(frames, '\t')) {
    if (frame.empty()) continue;
    out.append("  ").append(frame).push_back('\n');
  }
  return out;
}

}  // namespace ltd
