// An ltrun's cgroups are <its own cgroup>/ltd-<state tag>/run-ltrun<PID>
// (and the same under each v1 hierarchy it put a limit in): its pid is in
// the name. It removes them when it ends; one that is SIGKILLed cannot, so
// they stay, empty, for ever. The next ltrun or ltd whose own cgroup holds
// them removes them: only an `run-ltrun<PID>` subtree that is empty and
// whose ltrun is gone (no process PID, or one that started after the
// cgroup last changed: the pid was reused), and its ltd-<tag> parent once
// that is empty. ltd's own run cgroups (run-<instance>, run-job<ID>) are
// never touched here: ltd's sweep of its state dir has them.
//
// A process that probes whether a device program attaches (gpu_devices.h)
// makes ltd-device-probe-<PID> in its own cgroup2 cgroup and removes it at
// once; one SIGKILLed in between leaves it. The next probe there removes
// those of gone processes, by the same test.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ltd {

// The instance name of the ltrun with `pid` ("ltrun<PID>"); its cgroup is
// run-ltrun<PID>.
std::string LtrunInstance(pid_t pid);
// The pid in a run cgroup's name "run-ltrun<PID>"; nullopt for any other.
std::optional<pid_t> LtrunPidOf(std::string_view run_name);

// Removes the empty run-ltrun<PID> cgroups of gone ltruns under each of
// `own_dirs` (a process's own cgroup dirs: v2, and each v1 hierarchy's).
// Returns how many it removed; logs each.
int RemoveStaleLtrunCgroups(const std::vector<std::string>& own_dirs);

// The name of the device probe's cgroup of the process `pid`.
std::string DeviceProbeName(pid_t pid);
// Removes the probes of gone processes directly under `own_dir`; returns
// how many, logging each.
int RemoveStaleDeviceProbes(const std::string& own_dir);

}  // namespace ltd
