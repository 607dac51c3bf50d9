// GPUs checked free before reuse. A job's GPU goes back to the pool only
// when the job's processes are gone (the job table learns it from the end
// of the job's supervision) *and* NVML lists no
// compute process on it holding more than --gpu-leftover-mib: a leftover
// from before ltd, another tool, a process stuck in D state. Otherwise the
// GPU is quarantined, looked at again every kRecheck, and freed once clean.
// Without NVML (no driver, no GPUs) every check passes and ltd said so once.
// Also samples each GPU's memory and utilisation at a low rate for `show`.
// Loop thread only; NVML calls are cheap and few.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clock.h"
#include "job.h"
#include "nvml.h"
#include "proc_dir.h"

namespace ltd {

struct GpuHolder {
  pid_t pid = 0;
  std::string user;  // the process's owner, by name ("uid N" without one)
  std::optional<uint64_t> used_mib;
};

struct GpuQuarantine {
  WallTime since{};
  std::vector<GpuHolder> holders;  // what held it at the last look
};

class GpuPool {
 public:
  struct Config {
    uint64_t leftover_mib = 0;  // processes holding at most this much are ignored
    Millis recheck{2000};
    Millis sample{10000};
  };
  // `gpu_ids`: NVML indices of ltd's slots, by slot (empty: logical slots,
  // nothing to check). `info` may be null: no NVML, no checks.
  GpuPool(Clock& clock, GpuInfo* info, std::vector<std::string> gpu_ids, Config config);
  ~GpuPool();
  GpuPool(const GpuPool&) = delete;
  GpuPool& operator=(const GpuPool&) = delete;

  // Called with a slot when its quarantine ends; with nothing after each
  // round of usage samples.
  void SetCallbacks(std::function<void(int slot)> on_clean, std::function<void()> on_sample);
  // Starts sampling usage (a first sample now).
  void Start();

  bool checks_on() const { return info_ != nullptr && !gpu_ids_.empty(); }
  // The slots of a job whose processes are all gone: those whose GPU is
  // held by a process now are quarantined and returned.
  std::vector<int> CheckReleased(const std::vector<int>& slots);

  const GpuQuarantine* quarantine(int slot) const;
  // "GPU 3 quarantined: pid 1234 (alice) holds 3.1 GiB"; "" when not.
  std::string Describe(int slot) const;
  // The first quarantined slot, if any, for a pending job's reason.
  std::optional<int> AnyQuarantined() const;
  std::optional<GpuSample> usage(int slot) const;
  // Every compute process on the slot's GPU at the last sample, whoever's
  // (at most kMaxListed; `unlisted` more).
  struct Processes {
    std::vector<GpuHolder> listed;
    size_t unlisted = 0;
  };
  const Processes* processes(int slot) const;
  // N of the slot's /dev/nvidiaN, as NVML said at Start.
  std::optional<uint32_t> minor(int slot) const;
  const std::string& gpu(int slot) const;
  // Samples now unless the last sample is younger than `fresh` (`ltctl
  // gpus` asks for a view at most a second old; many asking cost one
  // NVML round a second).
  void SampleUnlessFresherThan(Millis fresh);

  static constexpr size_t kMaxListed = 64;

 private:
  // Holders of `slot`'s GPU over the threshold; nullopt when NVML failed.
  std::optional<std::vector<GpuHolder>> Holders(int slot);
  // NVML's compute processes on GPU `index` holding more than `over_mib`
  // (nullopt: all), each with its owner when it is still that process: the
  // first kMaxListed (each is held open while NVML is asked again), and
  // how many more.
  absl::StatusOr<Processes> Identify(int index, std::optional<uint64_t> over_mib);
  void ScheduleRecheck();
  void Recheck();
  void Sample();

  Clock& clock_;
  GpuInfo* info_;
  std::vector<std::string> gpu_ids_;
  Config config_;
  std::function<void(int)> on_clean_;
  std::function<void()> on_sample_;
  std::map<int, GpuQuarantine> quarantined_;     // by slot
  std::map<int, GpuSample> usage_;               // by slot, the last sample
  std::map<int, Processes> processes_;           // by slot, the last sample
  std::vector<std::optional<uint32_t>> minors_;  // by slot
  std::optional<Millis> sampled_at_;             // monotonic
  Clock::TimerId recheck_timer_ = 0;
  Clock::TimerId sample_timer_ = 0;
  bool failure_logged_ = false;
};

// The owner of the process by name, from its /proc directory.
std::string ProcessUser(const ProcDir& dir);
// "3.1 GiB", "512 MiB".
std::string FormatMib(uint64_t mib);

}  // namespace ltd
