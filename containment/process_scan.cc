#include "process_scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <set>

#include "fd.h"
#include "file_io.h"

namespace ltd {
namespace {

// Reads a small /proc file into `out`; false if the process is gone or
// the file is unreadable.
bool ReadProcFile(const char* path, std::string& out) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return false;
  out = std::move(*text);
  return true;
}

}  // namespace

namespace {

std::optional<ProcEntry> ParseStatText(const std::string& stat, pid_t pid) {
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so
  // the fields start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return std::nullopt;
  // STATE PPID PGRP SESSION ...
  ProcEntry e;
  e.pid = pid;
  e.state = stat[close + 2];
  char* next = nullptr;
  e.ppid = static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, &next, 10));
  std::strtol(next, &next, 10);  // pgrp
  e.session = static_cast<pid_t>(std::strtol(next, &next, 10));
  // tty_nr tpgid flags minflt cminflt majflt cmajflt, then utime stime,
  // cutime cstime priority nice num_threads itrealvalue, then starttime.
  for (int i = 0; i < 7; ++i) std::strtoll(next, &next, 10);
  const uint64_t utime = std::strtoull(next, &next, 10);
  const uint64_t stime = std::strtoull(next, &next, 10);
  e.cpu_ticks = utime + stime;
  for (int i = 0; i < 6; ++i) std::strtoll(next, &next, 10);
  e.start_time = std::strtoull(next, nullptr, 10);
  return e;
}

std::optional<ProcEntry> ParseStat(const char* path, pid_t pid) {
  std::string stat;
  if (!ReadProcFile(path, stat)) return std::nullopt;
  return ParseStatText(stat, pid);
}

std::string TrimWchan(std::string text) {
  if (text == "0") text.clear();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::optional<ProcEntry> ReadProcEntry(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  return ParseStat(path, pid);
}

std::optional<ProcEntry> ReadMainThreadEntry(pid_t pid) {
  char path[80];
  std::snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, pid);
  return ParseStat(path, pid);
}

std::optional<ProcEntry> ReadProcEntry(const ProcDir& dir) {
  auto stat = dir.Read("stat");
  if (!stat.ok()) return std::nullopt;
  return ParseStatText(*stat, dir.pid());
}

std::string ReadWchan(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/wchan", pid);
  return TrimWchan(ReadWholeFile(path, 256).value_or(""));
}

std::string ReadWchan(const ProcDir& dir) { return TrimWchan(dir.Read("wchan", 256).value_or("")); }

std::string ReadKernelStack(const ProcDir& dir, size_t max) {
  return dir.Read("stack", max).value_or("");
}

std::string ReadKernelStack(pid_t pid, size_t max) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stack", pid);
  return ReadWholeFile(path, max).value_or("");
}

std::vector<ProcEntry> ListProcesses() {
  std::vector<ProcEntry> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* d = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (auto e = ReadProcEntry(static_cast<pid_t>(pid))) out.push_back(*e);
  }
  closedir(proc);
  return out;
}

std::optional<ProcEnviron> ProcEnviron::Read(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/environ", pid);
  std::string raw;
  if (!ReadProcFile(path, raw) || raw.empty()) return std::nullopt;
  return ProcEnviron(std::move(raw));
}

bool ProcEnviron::Any(const std::function<bool(std::string_view)>& pred) const {
  size_t start = 0;
  while (start < raw_.size()) {
    size_t end = raw_.find('\0', start);
    if (end == std::string::npos) end = raw_.size();
    if (pred(std::string_view(raw_).substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

bool ProcEnviron::Has(std::string_view entry) const {
  return Any([&](std::string_view e) { return e == entry; });
}

bool ProcEnviron::HasPrefix(std::string_view prefix) const {
  return Any([&](std::string_view e) { return e.starts_with(prefix); });
}

std::vector<pid_t> FindProcesses(const EnvMatch& match) {
  std::vector<pid_t> found;
  const pid_t self = getpid();
  for (const ProcEntry& e : ListProcesses()) {
    if (e.pid == self || e.state == 'Z' || e.state == 'X') continue;
    auto env = ProcEnviron::Read(e.pid);
    if (env && match(*env)) found.push_back(e.pid);
  }
  return found;
}

int KillProcesses(const EnvMatch& match, int max_rounds) {
  std::set<pid_t> signalled;
  for (int round = 0; round < max_rounds; ++round) {
    bool fresh = false;
    for (pid_t pid : FindProcesses(match)) {
      // A process SIGKILLed in an earlier round may still be exiting; once
      // is enough for it.
      if (!signalled.insert(pid).second) continue;
      fresh = true;
      kill(pid, SIGKILL);  // ESRCH: it died on its own meanwhile
    }
    if (!fresh) break;
  }
  return static_cast<int>(signalled.size());
}

}  // namespace ltd
