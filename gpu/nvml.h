// NVIDIA's management library, loaded at run time (dlopen of
// libnvidia-ml.so.1), so that ltd builds and runs on hosts without a
// driver: there Nvml::Load fails and GPU checks are off. Only the handful
// of calls ltd needs, declared here from NVML's documented C ABI. Calls
// are cheap (microseconds to a millisecond) and made on the loop thread,
// at a low rate.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

struct GpuProcess {
  pid_t pid = 0;
  std::optional<uint64_t> used_mib;  // absent: NVML cannot tell (MIG, containers)
};

struct GpuUsage {
  uint64_t used_mib = 0;
  uint64_t total_mib = 0;
  std::optional<unsigned> utilization;  // percent, when NVML reports it
};

// What the GPU pool needs of NVML; a fake in unit tests.
class GpuInfo {
 public:
  virtual ~GpuInfo() = default;
  virtual absl::StatusOr<int> Count() = 0;
  // Compute processes on GPU `index` (NVML's index, as in --gpus).
  virtual absl::StatusOr<std::vector<GpuProcess>> Processes(int index) = 0;
  virtual absl::StatusOr<GpuUsage> Usage(int index) = 0;
  // N of the GPU's /dev/nvidiaN (nvmlDeviceGetMinorNumber).
  virtual absl::StatusOr<uint32_t> Minor(int index) {
    (void)index;
    return absl::UnimplementedError("no minor numbers here");
  }
};

class Nvml final : public GpuInfo {
 public:
  // dlopens `library` ("libnvidia-ml.so.1": the loader's search) and runs
  // nvmlInit; fails with a line saying why.
  static absl::StatusOr<std::unique_ptr<Nvml>> Load(const std::string& library);
  ~Nvml() override;  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  absl::StatusOr<int> Count() override;
  absl::StatusOr<std::vector<GpuProcess>> Processes(int index) override;
  absl::StatusOr<GpuUsage> Usage(int index) override;
  absl::StatusOr<uint32_t> Minor(int index) override;

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);
  absl::Status Error(const char* call, int index, int rc) const;

  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace ltd
