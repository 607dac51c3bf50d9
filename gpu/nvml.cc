#include "nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>

#include "str_util.h"

namespace ltd {
namespace {

// NVML's C ABI, as documented (nvml.h): return codes, an opaque device
// handle, and the structs ltd reads.
using nvmlReturn = int;
constexpr nvmlReturn kSuccess = 0;
constexpr nvmlReturn kInsufficientSize = 7;
using nvmlDevice = struct nvmlDeviceOpaque*;
constexpr unsigned long long kValueNotAvailable = ~0ull;

struct ProcessInfo {  // nvmlProcessInfo_t (the _v2/_v3 calls)
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t (the unversioned call)
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned int gpu, memory;
};

constexpr uint64_t kMiB = 1024 * 1024;

}  // namespace

struct Nvml::Api {
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn) = nullptr;
  nvmlReturn (*count)(unsigned int*) = nullptr;
  nvmlReturn (*handle_by_index)(unsigned int, nvmlDevice*) = nullptr;
  nvmlReturn (*processes)(nvmlDevice, unsigned int*, ProcessInfo*) = nullptr;
  nvmlReturn (*processes_v1)(nvmlDevice, unsigned int*, ProcessInfoV1*) = nullptr;
  nvmlReturn (*memory)(nvmlDevice, Memory*) = nullptr;
  nvmlReturn (*utilization)(nvmlDevice, Utilization*) = nullptr;
  nvmlReturn (*minor)(nvmlDevice, unsigned int*) = nullptr;
};

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(Cat("cannot load ", library, ": ", why != nullptr ? why : "?"));
  }
  auto api = std::make_unique<Api>();
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
  };
  auto first = [&](auto& fn, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      sym(fn, n);
      if (fn != nullptr) return;
    }
  };
  first(api->init, {"nvmlInit_v2", "nvmlInit"});
  sym(api->shutdown, "nvmlShutdown");
  sym(api->error_string, "nvmlErrorString");
  first(api->count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  first(api->handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  first(api->processes,
        {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (api->processes == nullptr) sym(api->processes_v1, "nvmlDeviceGetComputeRunningProcesses");
  sym(api->memory, "nvmlDeviceGetMemoryInfo");
  sym(api->utilization, "nvmlDeviceGetUtilizationRates");
  sym(api->minor, "nvmlDeviceGetMinorNumber");
  if (api->init == nullptr || api->shutdown == nullptr || api->count == nullptr ||
      api->handle_by_index == nullptr ||
      (api->processes == nullptr && api->processes_v1 == nullptr) || api->memory == nullptr) {
    dlclose(handle);
    return absl::NotFoundError(Cat(library, " lacks the NVML calls ltd needs; update the driver"));
  }
  if (const nvmlReturn rc = api->init(); rc != kSuccess) {
    // The text lives in the library: copy it before letting go of it.
    const char* why = api->error_string != nullptr ? api->error_string(rc) : nullptr;
    absl::Status failed = absl::UnavailableError(
        Cat("nvmlInit failed: ", why != nullptr ? std::string(why) : Cat("error ", rc)));
    dlclose(handle);
    return failed;
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, std::move(api)));
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

absl::Status Nvml::Error(const char* call, int index, int rc) const {
  const char* why = api_->error_string != nullptr ? api_->error_string(rc) : nullptr;
  return absl::UnavailableError(
      Cat(call, " on GPU ", index, ": ", why != nullptr ? std::string(why) : Cat("error ", rc)));
}

absl::StatusOr<int> Nvml::Count() {
  unsigned int n = 0;
  if (const nvmlReturn rc = api_->count(&n); rc != kSuccess)
    return Error("nvmlDeviceGetCount", -1, rc);
  return static_cast<int>(std::min(n, 1024u));
}

absl::StatusOr<std::vector<GpuProcess>> Nvml::Processes(int index) {
  nvmlDevice dev = nullptr;
  if (const nvmlReturn rc = api_->handle_by_index(static_cast<unsigned>(index), &dev);
      rc != kSuccess)
    return Error("nvmlDeviceGetHandleByIndex", index, rc);
  std::vector<GpuProcess> out;
  auto add = [&](unsigned pid, unsigned long long bytes) {
    GpuProcess p;
    p.pid = static_cast<pid_t>(pid);
    if (bytes != kValueNotAvailable) p.used_mib = bytes / kMiB;
    out.push_back(p);
  };
  // Processes come and go between the calls: ask with room to spare, and
  // again with more when NVML says it was not enough.
  for (unsigned int room = 64; room <= 65536; room *= 8) {
    unsigned int n = room;
    nvmlReturn rc;
    if (api_->processes != nullptr) {
      std::vector<ProcessInfo> infos(room);
      rc = api_->processes(dev, &n, infos.data());
      if (rc == kSuccess) {
        for (unsigned i = 0; i < std::min(n, room); ++i) add(infos[i].pid, infos[i].usedGpuMemory);
        return out;
      }
    } else {
      std::vector<ProcessInfoV1> infos(room);
      rc = api_->processes_v1(dev, &n, infos.data());
      if (rc == kSuccess) {
        for (unsigned i = 0; i < std::min(n, room); ++i) add(infos[i].pid, infos[i].usedGpuMemory);
        return out;
      }
    }
    if (rc != kInsufficientSize) return Error("nvmlDeviceGetComputeRunningProcesses", index, rc);
  }
  return Error("nvmlDeviceGetComputeRunningProcesses", index, kInsufficientSize);
}

absl::StatusOr<GpuUsage> Nvml::Usage(int index) {
  nvmlDevice dev = nullptr;
  if (const nvmlReturn rc = api_->handle_by_index(static_cast<unsigned>(index), &dev);
      rc != kSuccess)
    return Error("nvmlDeviceGetHandleByIndex", index, rc);
  Memory mem{};
  if (const nvmlReturn rc = api_->memory(dev, &mem); rc != kSuccess)
    return Error("nvmlDeviceGetMemoryInfo", index, rc);
  GpuUsage u;
  u.used_mib = mem.used / kMiB;
  u.total_mib = mem.total / kMiB;
  Utilization util{};
  if (api_->utilization != nullptr && api_->utilization(dev, &util) == kSuccess) {
    u.utilization = std::min(util.gpu, 100u);
  }
  return u;
}

absl::StatusOr<uint32_t> Nvml::Minor(int index) {
  if (api_->minor == nullptr) {
    return absl::UnimplementedError("this NVML has no nvmlDeviceGetMinorNumber");
  }
  nvmlDevice dev = nullptr;
  if (const nvmlReturn rc = api_->handle_by_index(static_cast<unsigned>(index), &dev);
      rc != kSuccess)
    return Error("nvmlDeviceGetHandleByIndex", index, rc);
  unsigned int minor = 0;
  if (const nvmlReturn rc = api_->minor(dev, &minor); rc != kSuccess)
    return Error("nvmlDeviceGetMinorNumber", index, rc);
  return minor;
}

}  // namespace ltd
