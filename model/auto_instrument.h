// Automatic heartbeats for Python ranks that never heard of ltd (docs/user-guide.md,
// "Automatic heartbeats"). ltd asks for them in a rank's environment; a
// rank's start (process/rank_start.h), running as the user once it has
// found the program, grants them only to a program that runs Python or may
// start it (a shell, `env`), by putting ltd's sitecustomize directory
// first on PYTHONPATH. Everything else runs exactly as without ltd: nothing
// of the request reaches it.
//
// Standard library only: lt-exec links this file.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace ltd {

// ltd -> the rank's start: the module directory. Never reaches a rank.
inline constexpr std::string_view kAutoHeartbeatDirVar = "LT_AUTO_HEARTBEAT_DIR";
// ltd -> rank: the check interval in milliseconds. The Python module
// activates only on digits and then sets it to "used", so that no process
// the rank's Python starts activates again.
inline constexpr std::string_view kAutoHeartbeatVar = "LT_AUTO_HEARTBEAT";

// How often a rank's module checks its main thread for a hang `timeout`:
// a tenth of it, within [20ms, 1s], so a verdict comes at most one
// interval after the timeout.
std::chrono::milliseconds AutoCheckInterval(std::chrono::milliseconds timeout);

// ltd's side: drops whatever LT_AUTO_HEARTBEAT* the client's environment
// carried (a client inside a rank has "used"), then, when `dir` is not
// empty, asks the rank's start for automatic heartbeats with that module directory.
void RequestAutoHeartbeat(std::vector<std::string>& env, const std::string& dir,
                          std::chrono::milliseconds timeout);

// Whether a program may run Python: MayRunPython in process/rank_start.h,
// where a rank's start decides it.

// The rank's side (made beforehand, RankStartPlan): the environment to exec with. With a request
// and a program that may run Python: PYTHONPATH gets the module directory first and
// LT_AUTO_HEARTBEAT stays. Otherwise both variables go. The directory variable never stays.
std::vector<std::string> ApplyAutoHeartbeat(const std::vector<std::string>& env,
                                            bool may_run_python);

// True when `env` holds a request (the rank's start reads no file without one).
bool HasAutoHeartbeatRequest(const std::vector<std::string>& env);

// Why ltd must not hand `dir` to ranks, or "" when it may: it must be a
// directory holding sitecustomize.py, and when ltd runs as root, it, its
// files and every directory above it must be root's and writable by no one
// else (else one user could run code in every other user's ranks).
std::string AutoHeartbeatDirProblem(const std::string& dir);

}  // namespace ltd
