// What one rank of examples/train is told: its command line and the torchrun
// environment. Kept apart from the LibTorch code so that this translation
// unit (CLI11 is header-only and not small) compiles in parallel with it.
#ifndef LTD_EXAMPLES_TRAIN_CONFIG_H_
#define LTD_EXAMPLES_TRAIN_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

namespace train {

// Exit code of a rank that hit --crash-rank/--crash-step, distinct from the
// 1 of a genuine error so that a supervisor's root cause can be checked.
inline constexpr int kInjectedCrashExitCode = 3;

struct Options {
  int64_t steps = 200;
  int64_t batch = 32;  // samples per rank per step
  int64_t hidden = 64;
  double lr = 0.1;
  int64_t print_every = 20;
  int64_t step_ms = 0;  // extra sleep per step, so a job lasts long enough to watch
  uint64_t seed = 1234;
  int64_t pg_timeout_s = 300;  // collective timeout; default from LT_TRAIN_PG_TIMEOUT

  // Fault injection; -1 means off. Steps count from 1, and a fault at step S
  // fires before step S runs, so the last heartbeat of that rank is S - 1.
  int crash_rank = -1;
  int64_t crash_step = -1;
  bool crash_signal = false;  // abort() instead of reporting and exiting 3
  int hang_rank = -1;
  int64_t hang_step = -1;
};

// The torchrun contract (docs/protocol.md, "The environment"), the part a
// trainer needs. Without RANK/WORLD_SIZE the program runs as one rank.
struct RankEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;  // 0 only with world_size 1: the store picks a port
};

struct ParseResult {
  std::optional<Options> options;  // empty: exit with exit_code (--help, bad usage)
  int exit_code = 0;
};

ParseResult ParseOptions(int argc, char** argv);

// Reads and validates the environment; on failure returns nullopt and sets
// *error to a message naming the variable and its value.
std::optional<RankEnv> ReadRankEnv(std::string* error);

// Checks the options that depend on the job's size (a --crash-rank that is
// not a rank of this job is a usage error, not a silent no-op).
std::optional<std::string> CheckAgainstEnv(const Options& options, const RankEnv& env);

}  // namespace train

#endif  // LTD_EXAMPLES_TRAIN_CONFIG_H_
