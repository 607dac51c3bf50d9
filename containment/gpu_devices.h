// Which GPUs a job's processes may open: the device nodes of the GPUs it
// was given (/dev/nvidiaN, character major 195, minor N) and nothing else
// of major 195 below 254; the control nodes every CUDA program opens
// (nvidiactl 195:255, nvidia-modeset 195:254), nvidia-uvm, nvidia-caps
// (majors of their own) and every other device stay as they were. As
// Slurm's ConstrainDevices and systemd's DeviceAllow=, in either layout:
//
//   v2  a BPF_PROG_TYPE_CGROUP_DEVICE program attached to the job's
//       cgroup2 cgroup (BPF_F_ALLOW_MULTI, so programs above it, systemd's
//       included, still apply); written here instruction by instruction
//       and loaded by the bpf() syscall, no compiler or libbpf needed.
//   v1  the job's cgroup in the devices hierarchy, with one devices.deny
//       line per GPU minor the job was not given: a v1 cgroup that allows
//       by default takes exceptions one rule at a time, so "deny all of
//       195, allow 1" cannot be said there.
//
// The program lives as long as the cgroup it is attached to; closing its
// fd does not detach it, and removing the cgroup frees it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cgroup_limits.h"

namespace ltd {

inline constexpr uint32_t kNvidiaMajor = 195;
// Minors at and above this are the driver's shared nodes (254
// nvidia-modeset, 255 nvidiactl); those below are GPUs.
inline constexpr uint32_t kNvidiaFirstSharedMinor = 254;

// Loads the program for `allowed` and attaches it to the cgroup2 cgroup
// at `dir`.
absl::Status AttachGpuDeviceProgram(const std::string& dir, const std::vector<uint32_t>& allowed);
// The v1 way, in the devices cgroup at `dir`.
absl::Status DenyOtherGpusV1(const std::string& dir, const std::vector<uint32_t>& allowed);

// Where device rules can be set for this process's jobs: kV2 when
// `v2_own_dir` (ltd's cgroup2 cgroup; empty without one) is set and a
// device program can be loaded and attached below it, else kV1 in the
// devices hierarchy of `mountinfo`, else kNone with why. `proven`: the
// cgroup2 cgroup where whoever started this process (ltd, for its
// supervisors) attached the probe's program; when it is `v2_own_dir`, kV2
// without probing again (a cgroup and a program loaded, every job's start).
ControllerPlace FindDevicePlace(const std::string& v2_own_dir, std::string_view mountinfo,
                                std::string_view proc_cgroup, const std::string& proven = "");

// "Device Minor: 3" of /proc/driver/nvidia/gpus/<bus id>/information.
absl::StatusOr<uint32_t> ParseNvidiaMinor(std::string_view information);

}  // namespace ltd
