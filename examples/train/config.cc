#include "config.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>

namespace train {
namespace {

// A week: any longer is a typo, and it keeps the milliseconds far from overflow.
constexpr int64_t kMaxPgTimeoutS = 7 * 24 * 3600;

// Whole-string integer parse: "12x", "" and out-of-range values are errors,
// which atoi would silently turn into a wrong rank.
template <typename Int>
bool ParseInt(const std::string& text, Int* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

// Reads an integer variable in [min, max]; absent leaves *out untouched.
template <typename Int>
bool ReadIntVar(const char* name, Int min, Int max, Int* out, std::string* error) {
  const char* value = std::getenv(name);
  if (value == nullptr) return true;
  Int parsed{};
  if (!ParseInt(value, &parsed) || parsed < min || parsed > max) {
    *error = std::string(name) + "='" + value + "' is not an integer in [" + std::to_string(min) +
             ", " + std::to_string(max) + "]";
    return false;
  }
  *out = parsed;
  return true;
}

}  // namespace

ParseResult ParseOptions(int argc, char** argv) {
  Options o;
  std::string env_error;
  if (!ReadIntVar<int64_t>("LT_TRAIN_PG_TIMEOUT", 1, kMaxPgTimeoutS, &o.pg_timeout_s, &env_error)) {
    std::fprintf(stderr, "train: %s\n", env_error.c_str());
    return {std::nullopt, 2};
  }

  CLI::App app{
      "Data-parallel MLP regression on LibTorch + c10d, one process per rank. Reads the "
      "torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK) and "
      "sends a heartbeat per step through libltworker (a no-op without LT_HEARTBEAT_FD).\n"
      "Exit codes: 0 done and parameters in sync across ranks; 1 error (also sent to ltd as "
      "the rank's error message); 2 bad usage; 3 injected crash; SIGABRT with --crash-signal.",
      "train"};
  app.add_option("--steps", o.steps, "optimizer steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "samples per rank per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "hidden layer width")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--print-every", o.print_every, "rank 0 prints the loss every N steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "sleep this long in every step (simulated compute)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the weights; data is seeded by seed and rank")
      ->capture_default_str();
  app.add_option("--pg-timeout", o.pg_timeout_s,
                 "seconds a collective may wait for its peers before failing "
                 "(default: $LT_TRAIN_PG_TIMEOUT, else 300)")
      ->check(CLI::Range(int64_t{1}, kMaxPgTimeoutS))
      ->capture_default_str();

  auto* crash_rank = app.add_option("--crash-rank", o.crash_rank,
                                    "this rank fails at --crash-step: sends 'error injected crash "
                                    "at step S' to ltd and exits 3");
  auto* crash_step = app.add_option("--crash-step", o.crash_step, "step of --crash-rank's failure")
                         ->check(CLI::PositiveNumber);
  auto* crash_signal =
      app.add_flag("--crash-signal", o.crash_signal,
                   "with --crash-rank: abort() (SIGABRT) instead, sending nothing");
  auto* hang_rank = app.add_option("--hang-rank", o.hang_rank,
                                   "this rank stops sending heartbeats at --hang-step and blocks "
                                   "forever; the others then block in their allreduce");
  auto* hang_step = app.add_option("--hang-step", o.hang_step, "step of --hang-rank's hang")
                        ->check(CLI::PositiveNumber);
  crash_rank->check(CLI::NonNegativeNumber)->needs(crash_step);
  crash_step->needs(crash_rank);
  crash_signal->needs(crash_rank);
  hang_rank->check(CLI::NonNegativeNumber)->needs(hang_step);
  hang_step->needs(hang_rank);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // app.exit prints the help or the complaint; CLI11's own codes (105,
    // 106, ...) are folded into the one documented usage code.
    return {std::nullopt, app.exit(e) == 0 ? 0 : 2};
  }
  if (o.crash_rank >= 0 && o.crash_step > o.steps) {
    std::fprintf(stderr, "train: --crash-step %lld is after the last step (%lld)\n",
                 static_cast<long long>(o.crash_step), static_cast<long long>(o.steps));
    return {std::nullopt, 2};
  }
  if (o.hang_rank >= 0 && o.hang_step > o.steps) {
    std::fprintf(stderr, "train: --hang-step %lld is after the last step (%lld)\n",
                 static_cast<long long>(o.hang_step), static_cast<long long>(o.steps));
    return {std::nullopt, 2};
  }
  return {o, 0};
}

std::optional<RankEnv> ReadRankEnv(std::string* error) {
  RankEnv env;
  constexpr int kMaxRanks = 1 << 20;
  if (!ReadIntVar("WORLD_SIZE", 1, kMaxRanks, &env.world_size, error) ||
      !ReadIntVar("RANK", 0, env.world_size - 1, &env.rank, error) ||
      !ReadIntVar("LOCAL_RANK", 0, kMaxRanks, &env.local_rank, error) ||
      !ReadIntVar<uint16_t>("MASTER_PORT", 0, std::numeric_limits<uint16_t>::max(),
                            &env.master_port, error)) {
    return std::nullopt;
  }
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    env.master_addr = addr;
  }
  // Port 0 lets a lone server pick any port, but the other ranks of a
  // multi-rank job could never find it.
  if (env.world_size > 1 && env.master_port == 0) {
    *error = "MASTER_PORT must be set to a port (1-65535) when WORLD_SIZE=" +
             std::to_string(env.world_size);
    return std::nullopt;
  }
  return env;
}

std::optional<std::string> CheckAgainstEnv(const Options& options, const RankEnv& env) {
  auto not_a_rank = [&](const char* flag, int rank) {
    return std::string(flag) + " " + std::to_string(rank) + " is not a rank of this " +
           std::to_string(env.world_size) + "-rank job";
  };
  if (options.crash_rank >= env.world_size) return not_a_rank("--crash-rank", options.crash_rank);
  if (options.hang_rank >= env.world_size) return not_a_rank("--hang-rank", options.hang_rank);
  return std::nullopt;
}

}  // namespace train
