#include "gpu_devices.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "cgroup_fs.h"
#include "file_io.h"
#include "posix_error.h"
#include "stale_runs.h"
#include "str_util.h"

namespace ltd {
namespace {

// The few instructions the program needs, encoded as the kernel's
// linux/filter.h macros would (that header is not uapi).
bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}
bpf_insn LoadU32(uint8_t dst, uint8_t src, int16_t off) {
  return Insn(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0);
}
bpf_insn AndImm(uint8_t dst, int32_t imm) {
  return Insn(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm);
}
bpf_insn MovImm(uint8_t dst, int32_t imm) {
  return Insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}
bpf_insn JumpImm(uint8_t op, uint8_t dst, int32_t imm, int16_t off) {
  return Insn(BPF_JMP | op | BPF_K, dst, 0, off, imm);
}
bpf_insn Exit() { return Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

// r1 points at struct bpf_cgroup_dev_ctx {access_type, major, minor}.
// Every test jumps forward to the two-instruction "allow" at the end.
std::vector<bpf_insn> Program(const std::vector<uint32_t>& allowed, bool allow_all) {
  std::vector<bpf_insn> p;
  std::vector<size_t> to_allow;  // jumps whose offset is set once the end is known
  auto jump_to_allow = [&](uint8_t op, uint8_t reg, int32_t imm) {
    to_allow.push_back(p.size());
    p.push_back(JumpImm(op, reg, imm, 0));
  };
  if (!allow_all) {
    p.push_back(LoadU32(BPF_REG_2, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, access_type)));
    p.push_back(AndImm(BPF_REG_2, 0xffff));  // the low half is the device type
    jump_to_allow(BPF_JNE, BPF_REG_2, BPF_DEVCG_DEV_CHAR);
    p.push_back(LoadU32(BPF_REG_2, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, major)));
    jump_to_allow(BPF_JNE, BPF_REG_2, static_cast<int32_t>(kNvidiaMajor));
    p.push_back(LoadU32(BPF_REG_2, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, minor)));
    jump_to_allow(BPF_JGE, BPF_REG_2, static_cast<int32_t>(kNvidiaFirstSharedMinor));
    for (uint32_t minor : allowed) jump_to_allow(BPF_JEQ, BPF_REG_2, static_cast<int32_t>(minor));
    p.push_back(MovImm(BPF_REG_0, 0));  // another job's GPU: EPERM
    p.push_back(Exit());
  }
  const size_t allow = p.size();
  p.push_back(MovImm(BPF_REG_0, 1));
  p.push_back(Exit());
  for (size_t at : to_allow) p[at].off = static_cast<int16_t>(allow - at - 1);
  return p;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof *attr); }

// Loads the program and attaches it to `dir`; the fd is closed before
// returning (the attachment holds the program).
absl::Status Attach(const std::string& dir, const std::vector<bpf_insn>& program) {
  static const char kLicense[] = "Apache-2.0";
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(program.data());
  load.insn_cnt = static_cast<uint32_t>(program.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  const int prog = static_cast<int>(Bpf(BPF_PROG_LOAD, &load));
  if (prog < 0) return PosixError("bpf(BPF_PROG_LOAD)", "cgroup device program", errno);
  const int cgroup = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cgroup < 0) {
    const int err = errno;
    close(prog);
    return PosixError("open", dir, err);
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cgroup);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const int rc = static_cast<int>(Bpf(BPF_PROG_ATTACH, &attach));
  const int err = errno;
  close(cgroup);
  close(prog);
  if (rc != 0) return PosixError("bpf(BPF_PROG_ATTACH)", dir, err);
  return absl::OkStatus();
}

}  // namespace

absl::Status AttachGpuDeviceProgram(const std::string& dir, const std::vector<uint32_t>& allowed) {
  return Attach(dir, Program(allowed, false));
}

absl::Status DenyOtherGpusV1(const std::string& dir, const std::vector<uint32_t>& allowed) {
  const std::string file = dir + "/devices.deny";
  for (uint32_t minor = 0; minor < kNvidiaFirstSharedMinor; ++minor) {
    if (std::find(allowed.begin(), allowed.end(), minor) != allowed.end()) continue;
    if (absl::Status s = WriteWholeFile(file, Cat("c ", kNvidiaMajor, ":", minor, " rwm"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

ControllerPlace FindDevicePlace(const std::string& v2_own_dir, std::string_view mountinfo,
                                std::string_view proc_cgroup, const std::string& proven) {
  std::string v2_why = "ltd is in no cgroup2 hierarchy";
  if (!v2_own_dir.empty() && v2_own_dir == proven) {
    ControllerPlace place;
    place.layout = CgroupLayout::kV2;
    place.own_dir = v2_own_dir;
    return place;
  }
  if (!v2_own_dir.empty()) {
    // A program that allows everything, on a cgroup of its own, removed
    // at once: proves both the load and an attachment below ltd's cgroup
    // (a program attached above without BPF_F_ALLOW_MULTI forbids it).
    RemoveStaleDeviceProbes(v2_own_dir);
    const std::string probe = Cat(v2_own_dir, "/", DeviceProbeName(getpid()));
    absl::Status s = MakeCgroupDir(probe);
    if (s.ok()) {
      s = Attach(probe, Program({}, true));
      rmdir(probe.c_str());
    }
    if (s.ok()) {
      ControllerPlace place;
      place.layout = CgroupLayout::kV2;
      place.own_dir = v2_own_dir;
      return place;
    }
    v2_why = std::string(s.message());
  }
  ControllerPlace place = FindController("devices", "", mountinfo, proc_cgroup);
  if (place.layout == CgroupLayout::kNone) {
    place.why = absl::FailedPreconditionError(
        Cat("no cgroup device program can be attached (", v2_why,
            ") and there is no v1 devices hierarchy (", place.why.message(), ")"));
  }
  return place;
}

absl::StatusOr<uint32_t> ParseNvidiaMinor(std::string_view information) {
  for (std::string_view line : NonEmptyFields(information, '\n')) {
    if (!line.starts_with("Device Minor:")) continue;
    std::string_view v = line.substr(13);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    uint32_t minor = 0;
    size_t digits = 0;
    for (; digits < v.size() && v[digits] >= '0' && v[digits] <= '9' && digits < 4; ++digits) {
      minor = minor * 10 + static_cast<uint32_t>(v[digits] - '0');
    }
    if (digits == 0 || minor >= kNvidiaFirstSharedMinor) break;
    return minor;
  }
  return absl::NotFoundError("no \"Device Minor:\" line with a GPU's minor (0-253)");
}

}  // namespace ltd
