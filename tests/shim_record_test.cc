// The job record on the supervisor API (proto/shim_record.h): a record
// crosses as a Record message whole, says whether it was saved, and a
// message of the release before Record (recorded below) still reads; the
// job table saves a final record its supervisor could not.
#include "shim_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fakes.h"
#include "job_manager.h"
#include "local_host.h"
#include "manager_fixture.h"

namespace ltd::test {
namespace {

namespace pb = shim::v1;

// Watch events as lt-shim of the release before Record sent them (the
// main branch at df2a2a1, its shim_service.cc's RecordEvent over its
// ToJson), for the job OldJob() makes: a record past the first of a watch
// (slim: no argv) while it ran, and the final one.
const char kOldRunning[] =
    "\012\243\012{\"after\":[],\"attempts\":[{\"ended_at\":null,\"master_port\":29500,\"restart_"
    "count\":0,\"root_cause\":null,\"started_at\":\"2026-12-01T10:00:01.250000Z\"}],\"auto_heart"
    "beat\":true,\"containment\":\"cgroup\",\"cuda_visible_devices\":\"0,1\",\"cwd\":\"/home/ali"
    "ce\",\"device_slots\":[0,1],\"devices\":2,\"ended_at\":null,\"exit_code\":null,\"gid\":1000"
    ",\"grace_ms\":10000,\"hang_report\":null,\"hang_timeout_ms\":60000,\"heartbeat_mode\":\"exp"
    "licit\",\"heartbeat_timeout_ms\":60000,\"id\":\"42\",\"master_addr\":\"\",\"master_port\":2"
    "9500,\"max_restarts\":0,\"name\":{\"base64\":\"dHJhaW7/\"},\"nnodes\":1,\"node_rank\":null,"
    "\"nodes\":[],\"ranks\":[{\"error\":\"\",\"exit_code\":null,\"last_heartbeat_at\":\"2026-12-"
    "01T10:00:05.000000Z\",\"last_step\":7,\"pid\":1000,\"rank\":0,\"signal\":null,\"started_at\""
    ":\"2026-12-01T10:00:01.250000Z\",\"state\":\"RUNNING\",\"steps_per_second\":0.0,\"straggler"
    "\":false},{\"error\":\"\",\"exit_code\":null,\"last_heartbeat_at\":\"2026-12-01T10:00:05.00"
    "0000Z\",\"last_step\":7,\"pid\":1001,\"rank\":1,\"signal\":null,\"started_at\":\"2026-12-01"
    "T10:00:01.250000Z\",\"state\":\"RUNNING\",\"steps_per_second\":0.0,\"straggler\":false}],\""
    "rdzv\":\"\",\"rdzv_timeout_ms\":600000,\"requested_master_port\":0,\"restart_count\":0,\"ro"
    "ot_cause\":null,\"run_id\":\"\",\"started_at\":\"2026-12-01T10:00:01.250000Z\",\"startup_ti"
    "meout_ms\":0,\"state\":\"RUNNING\",\"submitted_at\":\"2026-12-01T10:00:00.000000Z\",\"teard"
    "own_at\":null,\"uid\":1000,\"user\":\"alice\"}";
const char kOldEnded[] =
    "\032\364\014{\"after\":[],\"argv\":[\"python3\",\"train.py\"],\"attempts\":[{\"ended_at\":\""
    "2026-12-01T10:00:09.500000Z\",\"master_port\":29500,\"restart_count\":0,\"root_cause\":{\"a"
    "t\":\"2026-12-01T10:00:09.500000Z\",\"exit_code\":3,\"message\":\"rank 1 exited with code 3"
    "\",\"node\":null,\"rank\":1,\"reason\":\"exited\",\"signal\":0},\"started_at\":\"2026-12-01"
    "T10:00:01.250000Z\"}],\"auto_heartbeat\":true,\"containment\":\"cgroup\",\"cuda_visible_dev"
    "ices\":\"0,1\",\"cwd\":\"/home/alice\",\"device_slots\":[0,1],\"devices\":2,\"ended_at\":\""
    "2026-12-01T10:00:09.500000Z\",\"exit_code\":3,\"gid\":1000,\"grace_ms\":10000,\"hang_report"
    "\":null,\"hang_timeout_ms\":60000,\"heartbeat_mode\":\"explicit\",\"heartbeat_timeout_ms\":"
    "60000,\"id\":\"42\",\"master_addr\":\"\",\"master_port\":29500,\"max_restarts\":0,\"name\":"
    "{\"base64\":\"dHJhaW7/\"},\"nnodes\":1,\"node_rank\":null,\"nodes\":[],\"ranks\":[{\"error\""
    ":\"\",\"exit_code\":null,\"last_heartbeat_at\":\"2026-12-01T10:00:05.000000Z\",\"last_step\""
    ":7,\"pid\":1000,\"rank\":0,\"signal\":15,\"started_at\":\"2026-12-01T10:00:01.250000Z\",\"s"
    "tate\":\"KILLED\",\"steps_per_second\":0.0,\"straggler\":false},{\"error\":\"\",\"exit_code"
    "\":3,\"last_heartbeat_at\":\"2026-12-01T10:00:05.000000Z\",\"last_step\":7,\"pid\":1001,\"r"
    "ank\":1,\"signal\":null,\"started_at\":\"2026-12-01T10:00:01.250000Z\",\"state\":\"FAILED\""
    ",\"steps_per_second\":0.0,\"straggler\":false}],\"rdzv\":\"\",\"rdzv_timeout_ms\":600000,\""
    "requested_master_port\":0,\"restart_count\":0,\"root_cause\":{\"at\":\"2026-12-01T10:00:09."
    "500000Z\",\"exit_code\":3,\"message\":\"rank 1 exited with code 3\",\"node\":null,\"rank\":"
    "1,\"reason\":\"exited\",\"signal\":0},\"run_id\":\"\",\"started_at\":\"2026-12-01T10:00:01."
    "250000Z\",\"startup_timeout_ms\":0,\"state\":\"FAILED\",\"submitted_at\":\"2026-12-01T10:00"
    ":00.000000Z\",\"teardown_at\":null,\"uid\":1000,\"user\":\"alice\"}";

WallTime At(const char* text) { return *ParseTime(text); }

// The job the recorded events are of (the final one; `running`: as it ran).
Job OldJob(bool running) {
  Job job;
  job.id = "42";
  job.spec.name = "train\xff";
  job.user = "alice";
  job.spec.uid = 1000;
  job.spec.gid = 1000;
  job.spec.devices = 2;
  job.spec.argv = {"python3", "train.py"};
  job.spec.cwd = "/home/alice";
  job.spec.env = {"SECRET=1"};
  job.device_slots = {0, 1};
  job.cuda_visible_devices = "0,1";
  job.master_port = 29500;
  job.containment = "cgroup";
  job.submitted_at = At("2026-12-01T10:00:00.000000Z");
  job.started_at = At("2026-12-01T10:00:01.250000Z");
  job.state = JobState::kRunning;
  job.heartbeat_mode = HeartbeatMode::kExplicit;
  job.hang_timeout = std::chrono::milliseconds(60000);
  job.spec.heartbeat_timeout = std::chrono::milliseconds(60000);
  for (int i = 0; i < 2; ++i) {
    Rank r;
    r.rank = i;
    r.pid = 1000 + i;
    r.state = RankState::kRunning;
    r.started_at = job.started_at;
    r.last_step = 7;
    r.last_heartbeat_at = At("2026-12-01T10:00:05.000000Z");
    job.ranks.push_back(r);
  }
  Attempt a;
  a.started_at = *job.started_at;
  a.master_port = 29500;
  job.attempts.push_back(a);
  if (running) return job;
  job.state = JobState::kFailed;
  job.exit_code = 3;
  RootCause c;
  c.rank = 1;
  c.reason = CauseReason::kExited;
  c.exit_code = 3;
  c.at = At("2026-12-01T10:00:09.500000Z");
  c.message = "rank 1 exited with code 3";
  job.root_cause = c;
  job.ended_at = c.at;
  job.attempts[0].ended_at = c.at;
  job.attempts[0].root_cause = c;
  job.ranks[0].state = RankState::kKilled;
  job.ranks[0].signal = 15;
  job.ranks[1].state = RankState::kFailed;
  job.ranks[1].exit_code = 3;
  return job;
}

// A record with every part filled, bytes that are no UTF-8 in its text.
Job RichJob() {
  Job job = OldJob(/*running=*/false);
  job.state = JobState::kRunning;  // so that the environment is kept
  job.exit_code.reset();
  job.teardown_at = At("2026-12-01T10:00:09.000001Z");
  job.root_cause->deadline_at = At("2026-12-01T10:00:08.000000Z");
  job.root_cause->cancelled_by = "bob\xfe";
  job.root_cause->node = 2;
  job.restart_count = 1;
  job.spec.max_restarts = 3;
  job.spec.startup_timeout = std::chrono::milliseconds(5000);
  job.spec.grace = std::chrono::milliseconds(2500);
  job.spec.auto_heartbeat = false;
  job.spec.after = {"40", "41"};
  job.spec.nodes.nnodes = 2;
  job.spec.nodes.node_rank = 1;
  job.spec.nodes.master_addr = "10.0.0.1";
  job.spec.nodes.master_port = 29400;
  job.spec.nodes.run_id = "run\x01";
  job.spec.nodes.rdzv = "etcd://10.0.0.2:2379";
  job.spec.nodes.rdzv_timeout = std::chrono::milliseconds(30000);
  job.spec.nodes.rdzv_lease = std::chrono::milliseconds(3000);
  job.spec.rlimits = {ResourceLimit{*ResourceByName("NOFILE"), 1024, 4096}};
  job.spec.time_limit = std::chrono::milliseconds(3'600'000);
  job.spec.hold_on_hang = std::chrono::milliseconds(600'000);
  job.spec.output = "/home/bob/out-%j-%r.log";
  job.spec.error = "/home/bob/err\xff-%r.log";
  job.held_until = At("2026-12-01T10:10:08.500000Z");
  job.attempts.front().root_cause->reason = CauseReason::kTimeLimit;
  job.attempts.front().cpu = std::chrono::microseconds(1'500'042);
  job.ranks[1].error_message = "CUDA error\xc3";
  job.ranks[1].steps_per_second = 2.5;
  job.ranks[1].straggler = true;
  HangReport h;
  h.at = At("2026-12-01T10:00:08.500000Z");
  h.stalled_ranks = {1};
  h.straggler_ranks = {0};
  HangReportRank hr;
  hr.rank = 1;
  hr.last_step = 6;
  hr.last_heartbeat_at = At("2026-12-01T10:00:04.000000Z");
  hr.stalled = true;
  hr.in_collective = true;
  hr.process_state = "stopped (SIGSTOP)";
  hr.stack = "#0 nccl\xff";
  hr.stack_status = StackStatus::kTaken;
  hr.stack_note = "eu-stack";
  h.ranks.push_back(hr);
  // A multi-node run's report: another node's rank, and a node that told nothing.
  hr.node = 0;
  hr.rank = 0;
  hr.stack.clear();
  h.ranks.push_back(hr);
  h.missing_nodes.push_back({2, "no report within 6s\xff"});
  job.hang_report = h;
  NodeStatus n;
  n.node_rank = 0;
  n.host = "node0";
  n.state = "FAILED";
  n.root_cause = job.root_cause;
  n.root_cause->reason = CauseReason::kOom;
  job.nodes.push_back(n);
  job.spec.limits.memory_bytes = 64u << 20;
  job.spec.limits.memory_per_rank_bytes = 16u << 20;
  job.spec.limits.cpu_millis = 1500;
  UnkillableProcess u;
  u.rank = 1;
  u.pid = 1001;
  u.start_time = 123456789;
  u.state = "D";
  u.wchan = "nfs_wait\xfe";
  u.stack = "[<0>] nfs_wait_bit_killable+0x1/0x2\n";
  u.found_at = At("2026-12-01T10:00:09.500000Z");
  job.unkillable.push_back(u);
  u.rank = 0;
  u.pid = 1000;
  u.gone_at = At("2026-12-01T10:00:12.000000Z");
  job.unkillable.push_back(u);
  job.errors = ErrorsDir{.max_bytes = 1 << 20,
                         .max_files = 20,
                         .bytes = 1 << 20,
                         .files = 3,
                         .full = true,
                         .cut = {CutFile{.name = "rank-1/core\x01", .kept = 4096, .size = 1 << 30}},
                         .cut_files = 1};
  return job;
}

pb::Event Reparsed(const pb::Event& event) {
  std::string bytes;
  EXPECT_TRUE(event.SerializeToString(&bytes));
  pb::Event back;
  EXPECT_TRUE(back.ParseFromString(bytes));
  return back;
}

TEST(ShimRecord, ARecordCrossesWholeAsJobJsonHasIt) {
  const Job job = RichJob();
  pb::Record record;
  ToProto(job, &record);
  std::string bytes;
  ASSERT_TRUE(record.SerializeToString(&bytes));
  pb::Record parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  std::optional<Job> back = FromProto(parsed);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(ToJson(*back).dump(), ToJson(job).dump());
  EXPECT_EQ(back->spec.env, job.spec.env);
}

// A supervisor of a release before sbatch's pattern fields sends no
// output_patterns: its job's %n stays the name.
TEST(ShimRecord, ARecordWithoutOutputPatternsKeepsTheOldMeaning) {
  pb::Record record;
  ToProto(RichJob(), &record);
  EXPECT_EQ(FromProto(record)->spec.output_patterns, kSbatchPatterns);
  record.clear_output_patterns();
  EXPECT_EQ(FromProto(record)->spec.output_patterns, kLegacyPatterns);
}

TEST(ShimRecord, AnEventSaysWhetherTheRecordWasSavedAndLeavesTheEnvironmentOut) {
  Job job = OldJob(/*running=*/false);
  job.record_error = "write /state/jobs/42/job.json.tmp: No space left on device";
  auto got = RecordOf(Reparsed(RecordEventOf(job, true, RecordForm{true, false})));
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->final_record);
  EXPECT_EQ(got->job.record_error, job.record_error);
  EXPECT_EQ(ToJson(got->job).dump(), ToJson(job).dump());

  job = RichJob();
  job.record_error.clear();
  got = RecordOf(Reparsed(RecordEventOf(job, false, RecordForm{true, true})));
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->final_record);
  EXPECT_EQ(got->job.record_error, "");
  EXPECT_TRUE(got->job.spec.env.empty());
  EXPECT_TRUE(got->job.spec.argv.empty());  // slim: ltd has it
  EXPECT_EQ(got->job.ranks.size(), 2u);
}

TEST(ShimRecord, TheReleaseBeforeRecordStillReads) {
  pb::Event running;
  ASSERT_TRUE(running.ParseFromArray(kOldRunning, sizeof kOldRunning - 1));
  auto got = RecordOf(running);
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->final_record);
  EXPECT_EQ(got->job.id, "42");
  EXPECT_EQ(got->job.state, JobState::kRunning);
  EXPECT_EQ(got->job.spec.name, "train\xff");
  ASSERT_EQ(got->job.ranks.size(), 2u);
  EXPECT_EQ(got->job.ranks[1].pid, 1001);
  EXPECT_EQ(got->job.ranks[1].last_step, 7);
  EXPECT_TRUE(got->job.spec.argv.empty());
  EXPECT_EQ(got->job.record_error, "");  // that release never said

  pb::Event ended;
  ASSERT_TRUE(ended.ParseFromArray(kOldEnded, sizeof kOldEnded - 1));
  got = RecordOf(ended);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->final_record);
  Job expected = OldJob(/*running=*/false);
  expected.spec.env.clear();
  expected.spec.output_patterns = kLegacyPatterns;  // a record before sbatch's fields
  EXPECT_EQ(ToJson(got->job).dump(), ToJson(expected).dump());
}

// Every key of `old` with its value in `now` (which may have more: an ltd
// of the release before reads past keys it does not know).
void ExpectKeysKept(const nlohmann::json& old, const nlohmann::json& now, const std::string& at) {
  if (!old.is_object()) {
    if (old.is_array() && now.is_array() && old.size() == now.size()) {
      for (size_t i = 0; i < old.size(); ++i) {
        ExpectKeysKept(old[i], now[i], at + "[" + std::to_string(i) + "]");
      }
      return;
    }
    EXPECT_EQ(now, old) << at;
    return;
  }
  ASSERT_TRUE(now.is_object()) << at;
  for (const auto& [key, value] : old.items()) {
    ASSERT_TRUE(now.contains(key)) << at << "." << key << " is gone";
    ExpectKeysKept(value, now[key], at + "." + key);
  }
}

TEST(ShimRecord, AnLtdOfTheReleaseBeforeRecordGetsWhatItGotBefore) {
  // The recorded events' form and fields, from this release's encoder.
  pb::Event old_running, old_ended;
  ASSERT_TRUE(old_running.ParseFromArray(kOldRunning, sizeof kOldRunning - 1));
  ASSERT_TRUE(old_ended.ParseFromArray(kOldEnded, sizeof kOldEnded - 1));
  const pb::Event running = Reparsed(RecordEventOf(OldJob(true), false, RecordForm{false, true}));
  ASSERT_EQ(running.event_case(), pb::Event::kJob);
  ExpectKeysKept(nlohmann::json::parse(old_running.job()), nlohmann::json::parse(running.job()),
                 "running");
  const pb::Event ended = Reparsed(RecordEventOf(OldJob(false), true, RecordForm{false, false}));
  ASSERT_EQ(ended.event_case(), pb::Event::kEnded);
  ExpectKeysKept(nlohmann::json::parse(old_ended.ended()), nlohmann::json::parse(ended.ended()),
                 "ended");
}

TEST(ShimRecord, WhatIsNoJobsRecordOrOfALaterReleaseReadsSafely) {
  pb::Event event;
  event.mutable_record()->mutable_record();  // no id
  EXPECT_FALSE(RecordOf(event).has_value());
  event.set_job("{not json");
  EXPECT_FALSE(RecordOf(event).has_value());
  event.mutable_output()->set_data("a line");
  EXPECT_FALSE(RecordOf(event).has_value());

  pb::Record later;
  later.set_id("9");
  later.set_state(static_cast<pb::JobState>(77));
  pb::Record::Rank* rank = later.add_ranks();
  rank->set_state(static_cast<pb::RankState>(77));
  later.mutable_root_cause()->set_reason(static_cast<pb::CauseReason>(-5));
  later.set_heartbeat_mode(static_cast<pb::HeartbeatMode>(9));
  later.add_rlimits()->set_resource("NO_SUCH_LIMIT");
  pb::Record::Limit* inverted = later.add_rlimits();
  inverted->set_resource("NOFILE");
  inverted->set_soft(10);
  inverted->set_hard(5);
  std::optional<Job> job = FromProto(later);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->state, JobState::kLost);
  EXPECT_EQ(job->ranks.at(0).state, RankState::kLost);
  EXPECT_EQ(job->root_cause->reason, CauseReason::kDaemonLost);
  EXPECT_EQ(job->heartbeat_mode, HeartbeatMode::kNone);
  EXPECT_TRUE(job->spec.rlimits.empty());
}

// The job table over LocalSupervisorHost, whose records cross the codec:
// a final record the supervisor could not save is saved by the table once
// the disk takes it.
class RecordSavedTest : public ManagerFixture {
 protected:
  RecordSavedTest() : ManagerFixture("record") {
    RunnerConfig runner;
    runner.restart_backoff = Millis(0);
    ManagerConfig config;
    config.placement.slots = 4;
    Make(config, runner);
  }
};

TEST_F(RecordSavedTest, AFinalRecordTheSupervisorCouldNotSaveIsSavedByTheTable) {
  JobSpec spec;
  spec.devices = 1;
  spec.argv = {"/bin/true"};
  spec.cwd = "/";
  spec.uid = getuid();
  spec.gid = getgid();
  auto id = manager_->Submit(spec, "alice");
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ((*manager_->Resolve(*id))->state, JobState::kRunning);

  // The disk refuses every record of the job: its temp file cannot be made.
  const std::string tmp = store_->JobDir(*id) + "/job.json.tmp";
  ASSERT_TRUE(std::filesystem::create_directory(tmp));
  launcher_.Exit(*id, 0, 7);
  clock_.Advance(Millis(0));
  const Job& job = **manager_->Resolve(*id);
  ASSERT_EQ(job.state, JobState::kFailed);
  EXPECT_NE(job.record_error, "");
  EXPECT_EQ(store_->Load(*id)->state, JobState::kRunning);

  // Room again: the table's next try saves it.
  std::filesystem::remove(tmp);
  clock_.Advance(Millis(60000));
  auto saved = store_->Load(*id);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->state, JobState::kFailed);
  EXPECT_EQ(saved->exit_code, 7);
  EXPECT_EQ((*manager_->Resolve(*id))->record_error, "");
}

}  // namespace
}  // namespace ltd::test
