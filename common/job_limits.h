// What a job may use of the host as a whole (`--mem`, `--mem-per-rank`,
// `--cpus`): the limits its cgroups get. Plain data shared by the model,
// the process layer and the containment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ltd {

struct JobLimits {
  uint64_t memory_bytes = 0;           // every process of the job together; 0: none
  uint64_t memory_per_rank_bytes = 0;  // each rank with its descendants; 0: none
  uint32_t cpu_millis = 0;             // CPU time in thousandths of a CPU (1500: 1.5 CPUs); 0: none
  // The GPUs' minors (/dev/nvidiaN) the job may open, when ltd placed
  // GPUs and isolates them; set by ltd at placement, not by the user.
  bool isolate_gpus = false;
  std::vector<uint32_t> gpu_minors;
  bool memory() const { return memory_bytes != 0 || memory_per_rank_bytes != 0; }
  // Whether --mem, --mem-per-rank or --cpus asks for a cgroup limit.
  bool any() const { return memory() || cpu_millis != 0; }
  bool operator==(const JobLimits&) const = default;
};

// Below this a job cannot even start its ranks (docker takes 6M at least).
inline constexpr uint64_t kMinJobMemory = 8u << 20;
inline constexpr char kMinJobMemoryText[] = "8M";

// --cpus as typed ("2", "1.5", "0.25"): thousandths of a CPU; nullopt for
// anything else, or 0.
std::optional<uint32_t> ParseCpus(std::string_view text);
std::string FormatCpus(uint32_t millis);  // 1500 -> "1.5"

}  // namespace ltd
