#include "gpu_pool.h"

#include <pwd.h>
#include <sys/stat.h>

#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

std::string ProcessUser(const ProcDir& dir) {
  struct stat st {};
  if (fstat(dir.fd(), &st) != 0) return "";
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return Cat("uid ", st.st_uid);
}

std::string FormatMib(uint64_t mib) {
  if (mib < 1024) return Cat(mib, " MiB");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(mib) / 1024.0);
  return buf;
}

GpuPool::GpuPool(Clock& clock, GpuInfo* info, std::vector<std::string> gpu_ids, Config config)
    : clock_(clock), info_(info), gpu_ids_(std::move(gpu_ids)), config_(config) {}

GpuPool::~GpuPool() {
  for (Clock::TimerId t : {recheck_timer_, sample_timer_}) {
    if (t != 0) clock_.CancelTimer(t);
  }
}

void GpuPool::SetCallbacks(std::function<void(int)> on_clean, std::function<void()> on_sample) {
  on_clean_ = std::move(on_clean);
  on_sample_ = std::move(on_sample);
}

void GpuPool::Start() {
  if (!checks_on()) return;
  for (const std::string& id : gpu_ids_) {
    int index = -1;
    std::optional<uint32_t> minor;
    if (absl::SimpleAtoi(id, &index)) {
      if (auto m = info_->Minor(index); m.ok()) minor = *m;
    }
    minors_.push_back(minor);
  }
  Sample();
}

std::optional<uint32_t> GpuPool::minor(int slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < minors_.size()
             ? minors_[static_cast<size_t>(slot)]
             : std::nullopt;
}

const GpuPool::Processes* GpuPool::processes(int slot) const {
  auto it = processes_.find(slot);
  return it == processes_.end() ? nullptr : &it->second;
}

void GpuPool::SampleUnlessFresherThan(Millis fresh) {
  if (!checks_on() || (sampled_at_ && clock_.Monotonic() - *sampled_at_ < fresh)) return;
  if (sample_timer_ != 0) clock_.CancelTimer(sample_timer_);
  sample_timer_ = 0;
  Sample();
}

const std::string& GpuPool::gpu(int slot) const {
  static const std::string kNone;
  return slot >= 0 && static_cast<size_t>(slot) < gpu_ids_.size()
             ? gpu_ids_[static_cast<size_t>(slot)]
             : kNone;
}

std::optional<std::vector<GpuHolder>> GpuPool::Holders(int slot) {
  int index = -1;
  if (!absl::SimpleAtoi(gpu(slot), &index)) return std::vector<GpuHolder>{};
  auto holders = Identify(index, config_.leftover_mib);
  if (!holders.ok()) {
    if (!failure_logged_) {
      spdlog::error("NVML: {}; GPUs it cannot read are kept out of use until it can",
                    std::string(holders.status().message()));
    }
    failure_logged_ = true;
    return std::nullopt;
  }
  failure_logged_ = false;
  return std::move(holders->listed);
}

absl::StatusOr<GpuPool::Processes> GpuPool::Identify(int index, std::optional<uint64_t> over_mib) {
  auto procs = info_->Processes(index);
  if (!procs.ok()) return procs.status();
  // NVML's pids are numbers: each is held (ProcDir) and NVML asked again;
  // one it still lists while held is the holder, and its owner is read
  // from the held process, never from one that took its pid since.
  Processes out;
  std::vector<std::pair<const GpuProcess*, std::optional<ProcDir>>> held;
  for (const GpuProcess& p : *procs) {
    // Unknown use counts as use: better a GPU idle a while than a job OOM.
    if (over_mib && p.used_mib && *p.used_mib <= *over_mib) continue;
    if (held.size() == kMaxListed) {
      ++out.unlisted;
      continue;
    }
    held.emplace_back(&p, ProcDir::Open(static_cast<pid_t>(p.pid)));
  }
  std::set<uint64_t> again;
  if (!held.empty()) {
    if (auto now = info_->Processes(index); now.ok()) {
      for (const GpuProcess& p : *now) again.insert(static_cast<uint64_t>(p.pid));
    }
  }
  for (const auto& [p, dir] : held) {
    GpuHolder h;
    h.pid = p->pid;
    // Gone, or its pid another's: the user is not known ("gone" in gpus).
    const bool same = dir && dir->Alive() && again.count(static_cast<uint64_t>(p->pid)) != 0;
    if (same) h.user = ProcessUser(*dir);
    h.used_mib = p->used_mib;
    out.listed.push_back(std::move(h));
  }
  return out;
}

std::vector<int> GpuPool::CheckReleased(const std::vector<int>& slots) {
  std::vector<int> dirty;
  if (!checks_on()) return dirty;
  for (int slot : slots) {
    auto holders = Holders(slot);
    if (holders && holders->empty()) continue;
    GpuQuarantine q;
    q.since = clock_.Now();
    if (holders) q.holders = std::move(*holders);
    quarantined_[slot] = std::move(q);
    dirty.push_back(slot);
    spdlog::warn("GPU {} quarantined: {}", gpu(slot), Describe(slot));
  }
  if (!dirty.empty()) ScheduleRecheck();
  return dirty;
}

void GpuPool::ScheduleRecheck() {
  if (recheck_timer_ != 0 || quarantined_.empty()) return;
  recheck_timer_ = clock_.StartTimer(config_.recheck, [this] {
    recheck_timer_ = 0;
    Recheck();
  });
}

void GpuPool::Recheck() {
  std::vector<int> clean;
  for (auto& [slot, q] : quarantined_) {
    auto holders = Holders(slot);
    if (!holders) continue;
    if (holders->empty()) {
      clean.push_back(slot);
    } else {
      q.holders = std::move(*holders);
    }
  }
  for (int slot : clean) {
    const auto held = clock_.Now() - quarantined_[slot].since;
    quarantined_.erase(slot);
    spdlog::info("GPU {} is clean again after {} s; back in the pool", gpu(slot),
                 std::chrono::duration_cast<std::chrono::seconds>(held).count());
    if (on_clean_) on_clean_(slot);
  }
  ScheduleRecheck();
}

const GpuQuarantine* GpuPool::quarantine(int slot) const {
  auto it = quarantined_.find(slot);
  return it == quarantined_.end() ? nullptr : &it->second;
}

std::optional<int> GpuPool::AnyQuarantined() const {
  if (quarantined_.empty()) return std::nullopt;
  return quarantined_.begin()->first;
}

std::string GpuPool::Describe(int slot) const {
  const GpuQuarantine* q = quarantine(slot);
  if (q == nullptr) return "";
  std::string out = Cat("GPU ", gpu(slot), " quarantined: ");
  if (q->holders.empty()) return out + "NVML cannot read it";
  const GpuHolder& h = q->holders.front();
  out += Cat("pid ", h.pid, " (", h.user.empty() ? std::string("gone") : h.user, ") holds ",
             h.used_mib ? FormatMib(*h.used_mib) : std::string("memory"));
  if (q->holders.size() > 1) out += Cat(" and ", q->holders.size() - 1, " more");
  return out;
}

std::optional<GpuSample> GpuPool::usage(int slot) const {
  auto it = usage_.find(slot);
  if (it == usage_.end()) return std::nullopt;
  return it->second;
}

void GpuPool::Sample() {
  for (size_t slot = 0; slot < gpu_ids_.size(); ++slot) {
    int index = -1;
    if (!absl::SimpleAtoi(gpu_ids_[slot], &index)) continue;
    if (auto procs = Identify(index, std::nullopt); procs.ok()) {
      processes_[static_cast<int>(slot)] = std::move(*procs);
    } else {
      processes_.erase(static_cast<int>(slot));
    }
    auto u = info_->Usage(index);
    if (!u.ok()) {
      usage_.erase(static_cast<int>(slot));
      continue;
    }
    GpuSample s;
    s.gpu = gpu_ids_[slot];
    s.used_mib = u->used_mib;
    s.total_mib = u->total_mib;
    s.utilization = u->utilization;
    s.at = clock_.Now();
    usage_[static_cast<int>(slot)] = s;
  }
  sampled_at_ = clock_.Monotonic();
  if (on_sample_) on_sample_();
  sample_timer_ = clock_.StartTimer(config_.sample, [this] {
    sample_timer_ = 0;
    Sample();
  });
}

}  // namespace ltd
