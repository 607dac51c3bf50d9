// ltd's options turned into its configuration: the values it runs with,
// and for each value it refuses, the one line it says.
#include "daemon_config.h"

#include <gtest/gtest.h>

#include <functional>

namespace ltd {
namespace {

using std::chrono::milliseconds;

TEST(DaemonConfig, TheDefaultsAreTheDocumentedValues) {
  auto c = FromFlags(Options{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/run/ltd/ltd.sock");
  EXPECT_EQ(c->state_dir, "/var/lib/ltd");
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->level, spdlog::level::info);
  EXPECT_EQ(c->stack_budget, milliseconds(5000));
  EXPECT_EQ(c->idle_timeout, milliseconds(600'000));
  EXPECT_EQ(c->restart_backoff, milliseconds(1000));
  EXPECT_EQ(c->restore_window, milliseconds(600'000));
  EXPECT_EQ(c->auto_heartbeat_timeout, milliseconds(300'000));
  EXPECT_EQ(c->gpu_sample_interval, milliseconds(10'000));
  EXPECT_EQ(c->job_max_log_bytes, 1ull << 30);
  EXPECT_TRUE(c->gpu_ids.empty());
  EXPECT_EQ(c->devices, 0);
  EXPECT_EQ(c->keep_jobs, 10000u);
  EXPECT_EQ(c->max_restarts_limit, 100);
  EXPECT_TRUE(c->auto_heartbeat);
  EXPECT_EQ(c->unkillable_program, "");
  EXPECT_EQ(c->unkillable_program_timeout, milliseconds(60'000));
}

TEST(DaemonConfig, GivenValuesAreTyped) {
  Options o;
  o.log_level = "debug";
  o.stack_budget = "0";
  o.restore_window = "2h";
  o.gpu_sample_interval = "100ms";
  o.job_max_log_bytes = "1M";
  o.gpus = "3,1";
  o.user_max_connects = 0;
  o.metrics_listen = "127.0.0.1:0";
  o.unkillable_program = "/usr/local/sbin/reboot-node";
  o.unkillable_program_timeout = "5m";
  auto c = FromFlags(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->level, spdlog::level::debug);
  EXPECT_EQ(c->stack_budget, milliseconds(0));
  EXPECT_EQ(c->restore_window, milliseconds(7'200'000));
  EXPECT_EQ(c->gpu_sample_interval, milliseconds(100));
  EXPECT_EQ(c->job_max_log_bytes, 1u << 20);
  EXPECT_EQ(c->gpu_ids, (std::vector<std::string>{"3", "1"}));
  EXPECT_EQ(c->metrics_listen, "127.0.0.1:0");
  EXPECT_EQ(c->unkillable_program, "/usr/local/sbin/reboot-node");
  EXPECT_EQ(c->unkillable_program_timeout, milliseconds(300'000));
}

TEST(DaemonConfig, EachRefusedValueIsOneLineNamingTheFlag) {
  const std::vector<std::pair<std::function<void(Options&)>, std::string>> cases = {
      {[](Options& o) { o.log_level = "loud"; },
       "unknown --log-level 'loud'; use trace, debug, info, warn or error"},
      {[](Options& o) { o.stack_budget = "5x"; },
       "--stack-budget '5x' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain "
       "seconds"},
      {[](Options& o) { o.idle_timeout = "-1s"; },
       "--idle-timeout '-1s' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain "
       "seconds"},
      {[](Options& o) { o.restart_backoff = ""; },
       "--restart-backoff '' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain "
       "seconds"},
      {[](Options& o) { o.restore_window = "soon"; },
       "--restore-window 'soon' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain "
       "seconds"},
      {[](Options& o) { o.auto_heartbeat_timeout = "1y"; },
       "--auto-heartbeat-timeout '1y' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or "
       "plain "
       "seconds"},
      {[](Options& o) { o.gpu_sample_interval = "fast"; },
       "--gpu-sample-interval 'fast' is not a duration; use e.g. 500ms, 10s, 1h30m, 01:30:00 or "
       "plain "
       "seconds"},
      {[](Options& o) { o.gpu_sample_interval = "99ms"; },
       "--gpu-sample-interval must be at least 100ms"},
      {[](Options& o) { o.auto_heartbeat_timeout = "0"; },
       "--auto-heartbeat-timeout must be positive; use --auto-heartbeat=false to turn it off"},
      {[](Options& o) { o.job_max_log_bytes = "512K"; },
       "--job-max-log-bytes '512K' is not a size of at least 1M; use e.g. 1G"},
      {[](Options& o) { o.job_max_log_bytes = "lots"; },
       "--job-max-log-bytes 'lots' is not a size of at least 1M; use e.g. 1G"},
      {[](Options& o) { o.gpus = "0,,1"; }, "--gpus takes GPU indices such as 0,1,2,3; got '0,,1'"},
      {[](Options& o) { o.gpus = "GPU-1"; },
       "--gpus takes GPU indices such as 0,1,2,3; got 'GPU-1'"},
      {[](Options& o) { o.unkillable_program = "reboot-node"; },
       "--unkillable-program 'reboot-node' is not an absolute path; give its full path"},
      {[](Options& o) { o.unkillable_program_timeout = "never"; },
       "--unkillable-program-timeout 'never' is not a duration; use e.g. 500ms, 10s, 1h30m, "
       "01:30:00 or "
       "plain seconds"},
  };
  for (const auto& [change, message] : cases) {
    Options o;
    change(o);
    auto c = FromFlags(o);
    ASSERT_FALSE(c.ok()) << message;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    EXPECT_EQ(c.status().message(), message);
    EXPECT_EQ(std::string(c.status().message()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace ltd
