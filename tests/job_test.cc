#include "job.h"

#include <gtest/gtest.h>
#include <limits.h>

namespace ltd {
namespace {

TEST(ExitCode, FollowsTheSpec) {
  RootCause c;
  c.reason = CauseReason::kExited;
  c.exit_code = 3;
  EXPECT_EQ(ExitCodeFor(c), 3);
  c.reason = CauseReason::kSignaled;
  c.signal = 11;
  EXPECT_EQ(ExitCodeFor(c), 139);
  c.reason = CauseReason::kHang;
  EXPECT_EQ(ExitCodeFor(c), 124);
  c.reason = CauseReason::kStartupTimeout;
  EXPECT_EQ(ExitCodeFor(c), 124);
  c.reason = CauseReason::kCancelled;
  EXPECT_EQ(ExitCodeFor(c), 130);
  c.reason = CauseReason::kDaemonLost;
  EXPECT_EQ(ExitCodeFor(c), 1);
  c.reason = CauseReason::kSpawnFailed;
  c.exit_code = 126;
  EXPECT_EQ(ExitCodeFor(c), 126);
}

TEST(Time, Rfc3339RoundTrip) {
  const WallTime t = WallTime(std::chrono::milliseconds(1'796'000'123'456));
  const std::string s = FormatTime(t);
  EXPECT_EQ(s, "2026-11-30T00:55:23.456000Z");
  EXPECT_EQ(ParseTime(s), t);
  EXPECT_FALSE(ParseTime("yesterday"));
  EXPECT_EQ(ParseTime("2026-11-30T00:55:23.456Z"), t);  // fewer digits read too
}

// Found by fuzz/job_json: a record's time past 2262 ("5732-...") was
// turned into nanoseconds that overflow 64 bits (undefined behaviour in
// the state dir's reader); now it is no time.
TEST(Time, BeyondWhatWallTimeHoldsIsNoTime) {
  EXPECT_FALSE(ParseTime("5732-01-01T00:00:00Z"));
  EXPECT_FALSE(ParseTime("9999-12-31T23:59:59.999999Z"));
  EXPECT_TRUE(ParseTime("2200-01-01T00:00:00Z"));
}

// Found by fuzz/job_json: a time before 1970 with a fraction was written
// "1730-12-01T17:02:04.-877000Z" (the seconds rounded toward zero), which
// reads back as no time; its whole seconds now round down.
TEST(Time, BeforeNineteenSeventyKeepsItsFraction) {
  const auto t = ParseTime("1730-12-01T17:02:03.123000Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(FormatTime(*t), "1730-12-01T17:02:03.123000Z");
  const WallTime just_before = WallTime(std::chrono::microseconds(-1));
  EXPECT_EQ(FormatTime(just_before), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(ParseTime(FormatTime(just_before)), just_before);
}

TEST(JobRecord, JsonRoundTripKeepsEverything) {
  Job job;
  job.id = "17";
  job.spec.name = "bert";
  job.spec.devices = 2;
  job.spec.argv = {"/usr/bin/python3", "train.py"};
  job.spec.heartbeat_timeout = std::chrono::milliseconds(30'000);
  job.user = "alice";
  job.state = JobState::kFailed;
  job.exit_code = 124;
  job.master_port = 29500;
  job.submitted_at = WallTime(std::chrono::seconds(1'800'000'000));
  RootCause cause;
  cause.rank = 1;
  cause.reason = CauseReason::kHang;
  cause.message = "no heartbeat";
  cause.at = job.submitted_at;
  job.root_cause = cause;
  Rank r;
  r.rank = 1;
  r.pid = 4242;
  r.state = RankState::kFailed;
  r.signal = 15;
  r.last_step = 99;
  job.ranks = {Rank{}, r};
  HangReport h;
  h.stalled_ranks = {1};
  HangReportRank rank;
  rank.rank = 1;
  rank.last_step = 99;
  rank.stalled = true;
  rank.straggler = true;
  rank.process_state = "stopped (SIGSTOP)";
  rank.stack = "#0 injected_hang";
  rank.stack_status = StackStatus::kTimedOut;
  rank.stack_note = "eu-stack was still running when the 5s budget ran out";
  HangReportRank old_rank = rank;  // of a record that said nothing of its stack
  old_rank.rank = 0;
  old_rank.stack_status = StackStatus::kUnknown;
  old_rank.stack_note.clear();
  h.ranks = {old_rank, rank};
  job.hang_report = h;
  Attempt a;
  a.master_port = 29500;
  a.root_cause = cause;
  a.cpu = std::chrono::microseconds(1'234'567);
  Attempt uncounted = a;  // a containment that counts no CPU
  uncounted.cpu.reset();
  job.attempts = {a, uncounted};

  const nlohmann::json j = ToJson(job);
  EXPECT_EQ(j["attempts"][0]["cpu_us"], 1'234'567);
  EXPECT_TRUE(j["attempts"][1]["cpu_us"].is_null());
  EXPECT_EQ(j["root_cause"]["reason"], "hang");
  EXPECT_EQ(j["ranks"][1]["last_step"], 99);
  EXPECT_TRUE(j["ranks"][0]["last_step"].is_null());
  EXPECT_EQ(j["hang_report"]["ranks"][1]["stack_status"], "timed_out");
  auto back = JobFromJson(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(back->hang_report->ranks[1].stack_status, StackStatus::kTimedOut);
  // Records of releases before the field read as "unknown".
  nlohmann::json old = j;
  old["hang_report"]["ranks"][1].erase("stack_status");
  old["hang_report"]["ranks"][1].erase("stack_note");
  EXPECT_EQ(JobFromJson(old)->hang_report->ranks[1].stack_status, StackStatus::kUnknown);
}

// The submitter's groups, what its ranks get, are in the record while the
// job may (re)start; a final record drops them, as its environment. Any
// list but one of gids the kernel takes reads as none (looked up), never as
// another list.
TEST(JobRecord, GroupsAreKeptUntilTheJobEndsAndOnlyAsGids) {
  Job job;
  job.id = "3";
  job.state = JobState::kPending;
  job.spec.groups = std::vector<gid_t>{100, 27, 4294967294u};
  nlohmann::json j = ToJson(job);
  EXPECT_EQ(j["groups"], nlohmann::json({100, 27, 4294967294u}));
  EXPECT_EQ(JobFromJson(j)->spec.groups, job.spec.groups);
  job.spec.groups = std::vector<gid_t>{};  // none but the primary group: kept as such
  EXPECT_EQ(JobFromJson(ToJson(job))->spec.groups, std::vector<gid_t>{});
  job.spec.groups.reset();
  EXPECT_FALSE(ToJson(job).contains("groups"));
  EXPECT_FALSE(JobFromJson(ToJson(job))->spec.groups) << "an earlier release's record";
  job.spec.groups = std::vector<gid_t>{100};
  job.state = JobState::kSucceeded;
  EXPECT_FALSE(ToJson(job).contains("groups"));

  for (const char* bad : {R"([-1])", R"([4294967295])", R"([1.5])", R"(["27"])", R"([[27]])",
                          R"({"27": 27})", R"("27")", R"([27, null])", R"([1e3])"}) {
    nlohmann::json b = j;
    b["groups"] = nlohmann::json::parse(bad);
    auto back = JobFromJson(b);
    ASSERT_TRUE(back) << bad;
    EXPECT_FALSE(back->spec.groups) << bad;
  }
  nlohmann::json many = j;
  many["groups"] = nlohmann::json::array();
  for (int i = 0; i <= NGROUPS_MAX; ++i) many["groups"].push_back(i);
  EXPECT_FALSE(JobFromJson(many)->spec.groups) << "more than the kernel's NGROUPS_MAX";
  many["groups"] = nlohmann::json::array();
  for (int i = 0; i < NGROUPS_MAX; ++i) many["groups"].push_back(i);
  const auto most = JobFromJson(many);
  ASSERT_TRUE(most && most->spec.groups);
  EXPECT_EQ(most->spec.groups->size(), static_cast<size_t>(NGROUPS_MAX));
}

// A rank's `error caf\351`, a Latin-1 directory, arguments that are no
// text: a record keeps each byte and never fails to dump.
TEST(JobRecord, NonUtf8BytesInEveryBytesFieldRoundTripExactly) {
  const std::string latin1 = "caf\xE9";
  const std::string broken = "x\xC0\xAF\xED\xA0\x80\xF0\x9F";  // overlong, surrogate, cut short
  Job job;
  job.id = "3";
  job.state = JobState::kFailed;
  job.spec.name = "n\xE9";
  job.spec.argv = {"/bin/" + latin1, broken, "", "ok \xC3\xA9"};
  job.spec.cwd = "/tmp/" + latin1;
  job.user = "us\xE9r";
  job.cuda_visible_devices = "0,\xFF";
  job.containment = "cgroup\x80";
  RootCause cause;
  cause.rank = 0;
  cause.message = "error " + latin1;
  job.root_cause = cause;
  Rank r;
  r.error_message = "boom " + broken;
  job.ranks = {r};
  HangReport h;
  HangReportRank hr;
  hr.process_state = "stopped \xFE";
  hr.stack = "#0 f\xE9()\n#1 main";
  h.ranks = {hr};
  job.hang_report = h;
  Attempt a;
  a.root_cause = cause;
  job.attempts = {a};

  std::string text;
  ASSERT_NO_THROW(text = ToJson(job).dump(2));
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << text;
  auto back = JobFromJson(parsed);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->spec.name, job.spec.name);
  EXPECT_EQ(back->spec.argv, job.spec.argv);
  EXPECT_EQ(back->spec.cwd, job.spec.cwd);
  EXPECT_EQ(back->user, job.user);
  EXPECT_EQ(back->cuda_visible_devices, job.cuda_visible_devices);
  EXPECT_EQ(back->containment, job.containment);
  ASSERT_TRUE(back->root_cause);
  EXPECT_EQ(back->root_cause->message, cause.message);
  ASSERT_EQ(back->ranks.size(), 1u);
  EXPECT_EQ(back->ranks[0].error_message, r.error_message);
  ASSERT_TRUE(back->hang_report);
  ASSERT_EQ(back->hang_report->ranks.size(), 1u);
  EXPECT_EQ(back->hang_report->ranks[0].process_state, hr.process_state);
  EXPECT_EQ(back->hang_report->ranks[0].stack, hr.stack);
  ASSERT_EQ(back->attempts.size(), 1u);
  ASSERT_TRUE(back->attempts[0].root_cause);
  EXPECT_EQ(back->attempts[0].root_cause->message, cause.message);
  EXPECT_EQ(ToJson(*back), ToJson(job));
  // Text stays readable: valid UTF-8 is a plain string.
  EXPECT_EQ(parsed["argv"][3], "ok \xC3\xA9");
  EXPECT_TRUE(parsed["argv"][0].is_object());
}

TEST(JobRecord, GarbageIsRejectedNotFatal) {
  EXPECT_FALSE(JobFromJson(nlohmann::json::parse("[1,2]")));
  EXPECT_FALSE(JobFromJson(nlohmann::json::parse(R"({"id": "1", "state": "DANCING"})")));
  auto partial = JobFromJson(
      nlohmann::json::parse(R"({"id": "1", "state": "RUNNING", "ranks": [{"pid": "x"}]})"));
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->ranks.size(), 1u);
  // A bytes field in neither form reads as empty; the record still loads.
  auto odd = JobFromJson(nlohmann::json::parse(
      R"({"id": "2", "state": "FAILED", "argv": ["a", 7, {"base64": "Yg=="}], "cwd": {"base64": "?"}})"));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->spec.argv, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(odd->spec.cwd, "");
  // A float where an integer is meant reads as none, not as a cast of it
  // (undefined past the integer's range; fuzz/job_json found it).
  auto floats = JobFromJson(nlohmann::json::parse(
      R"({"id": "3", "state": "FAILED", "devices": 2.5, "max_restarts": 3.3e38,
          "device_slots": [1, 2.0], "unkillable": [{"pid": 7, "start_time": 3.3e38}]})"));
  ASSERT_TRUE(floats);
  EXPECT_EQ(floats->spec.devices, 0);
  EXPECT_EQ(floats->spec.max_restarts, 0);
  EXPECT_TRUE(floats->device_slots.empty());
  ASSERT_EQ(floats->unkillable.size(), 1u);
  EXPECT_EQ(floats->unkillable[0].pid, 7);
  EXPECT_EQ(floats->unkillable[0].start_time, 0u);
  // Files named as cut are some of those counted: a list beside no count,
  // or longer than it, is not kept (it wrote no "errors" back at all, and
  // read again differed; fuzz/job_json found it).
  auto uncounted = JobFromJson(nlohmann::json::parse(
      R"({"id": "4", "state": "FAILED", "errors": {"cut": [{"name": "x", "kept": 1, "size": 9}]}})"));
  ASSERT_TRUE(uncounted);
  EXPECT_TRUE(uncounted->errors.cut.empty());
  EXPECT_EQ(uncounted->errors, ErrorsDir{});
  auto longer = JobFromJson(nlohmann::json::parse(
      R"({"id": "5", "state": "FAILED", "errors": {"cut_files": 1, "cut": [{"name": "a"}, {"name": "b"}]}})"));
  ASSERT_TRUE(longer);
  ASSERT_EQ(longer->errors.cut.size(), 1u);
  EXPECT_EQ(longer->errors.cut[0].name, "a");
  EXPECT_EQ(ToJson(*JobFromJson(ToJson(*longer))), ToJson(*longer));
  // A CPU count that is no count of microseconds reads as none.
  auto counts = JobFromJson(nlohmann::json::parse(
      R"({"id": "6", "state": "FAILED", "attempts": [{"cpu_us": -5}, {"cpu_us": 1e30},
          {"cpu_us": "12"}, {"cpu_us": 9223372036854775807}, {"cpu_us": 0}]})"));
  ASSERT_TRUE(counts);
  ASSERT_EQ(counts->attempts.size(), 5u);
  EXPECT_FALSE(counts->attempts[0].cpu);
  EXPECT_FALSE(counts->attempts[1].cpu);
  EXPECT_FALSE(counts->attempts[2].cpu);
  EXPECT_EQ(counts->attempts[3].cpu, std::chrono::microseconds::max());
  EXPECT_EQ(counts->attempts[4].cpu, std::chrono::microseconds(0));
}

// A finished job in memory is a summary: its command line cut, its
// environment gone; what was cut is counted, for the view's mark.
TEST(JobSummary, CutsTheCommandLineAndDropsTheEnvironment) {
  Job job;
  job.spec.argv = {"python3", "train.py"};
  for (int i = 0; i < 19000; ++i) job.spec.argv.push_back(std::string(99, 'x'));
  job.spec.env = {"A=1", "B=2"};
  CutToSummary(job, 4096);
  size_t kept = 0;
  for (const auto& a : job.spec.argv) kept += a.size();
  EXPECT_LE(kept, 4096u);
  EXPECT_EQ(job.spec.argv[0], "python3");
  EXPECT_EQ(kept + job.table.argv_cut, 7u + 8u + 19000u * 99u);
  EXPECT_TRUE(job.spec.env.empty());
  job.spec.groups = std::vector<gid_t>{4, 27};
  CutToSummary(job, 4096);
  EXPECT_FALSE(job.spec.groups);
  // A small one stays whole; a huge program name keeps its first bytes.
  Job small;
  small.spec.argv = {"/bin/true"};
  CutToSummary(small, 4096);
  EXPECT_EQ(small.spec.argv, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(small.table.argv_cut, 0u);
  Job huge;
  huge.spec.argv = {std::string(100000, 'p'), "arg"};
  CutToSummary(huge, 4096);
  ASSERT_EQ(huge.spec.argv.size(), 1u);
  EXPECT_EQ(huge.spec.argv[0].size(), 4096u);
  EXPECT_EQ(huge.table.argv_cut, 100000u - 4096u + 3u);
}

// What the ranks said is bounded in a summary whatever the job did: every
// attempt's cause, rank's error and stack cut (the record has them whole),
// the job's own root cause kept as it is.
TEST(JobSummary, CutsWhatEachAttemptAndRankSaid) {
  Job job;
  job.spec.argv = {"train"};
  RootCause cause;
  cause.reason = CauseReason::kExited;
  cause.exit_code = 1;
  cause.message = std::string(4096, 'c');
  cause.cancelled_by = std::string(4096, 'b');  // as a record of a forged node's words
  for (int i = 0; i < 101; ++i) {
    Attempt a;
    a.restart_count = i;
    a.root_cause = cause;
    job.attempts.push_back(a);
  }
  job.root_cause = cause;
  job.ranks.resize(8);
  for (Rank& r : job.ranks) r.error_message = std::string(4096, 'e');
  HangReport report;
  report.ranks.resize(8);
  for (HangReportRank& r : report.ranks) r.stack = std::string(64 * 1024, 's');
  job.hang_report = report;
  job.nodes.resize(16);
  for (NodeStatus& n : job.nodes) n.root_cause = cause, n.host = std::string(4096, 'h');
  CutToSummary(job, 4096);
  size_t text = 0;
  for (const NodeStatus& n : job.nodes) {
    text += n.root_cause->message.size() + n.root_cause->cancelled_by.size() + n.host.size();
  }
  for (const Attempt& a : job.attempts) {
    text += a.root_cause->message.size() + a.root_cause->cancelled_by.size();
  }
  for (const Rank& r : job.ranks) text += r.error_message.size();
  for (const HangReportRank& r : job.hang_report->ranks) text += r.stack.size();
  EXPECT_LE(text, (2 * 101u + 8u + 8u + 3 * 16u) * kSummaryTextBytes);
  EXPECT_EQ(job.attempts[7].root_cause->message.substr(0, 10), std::string(10, 'c'));
  EXPECT_TRUE(job.attempts[7].root_cause->message.ends_with(" bytes]"));
  EXPECT_EQ(job.root_cause->message, cause.message);
  EXPECT_TRUE(job.table.details_cut);
  // What fits is not cut, and nothing says it was.
  Job small;
  small.spec.argv = {"/bin/true"};
  small.ranks.resize(1);
  small.ranks[0].error_message = "CUDA out of memory";
  CutToSummary(small, 4096);
  EXPECT_EQ(small.ranks[0].error_message, "CUDA out of memory");
  EXPECT_FALSE(small.table.details_cut);
}

TEST(RankBeats, ApplySetsTheBeatenRanksAndIgnoresRanksTheJobLacks) {
  Job job;
  job.ranks.resize(3);
  for (int r = 0; r < 3; ++r) job.ranks[static_cast<size_t>(r)].rank = r;
  job.ranks[1].state = RankState::kRunning;
  job.ranks[1].error_message = "kept";
  const WallTime at = WallTime(std::chrono::seconds(1'800'000'000));
  ApplyBeats(job, {{1, 42, at, 2.5}, {-1, 7, at, 1}, {3, 7, at, 1}});
  EXPECT_EQ(BeatOf(job.ranks[1]), (RankBeat{1, 42, at, 2.5}));
  // The rest of the rank, and the other ranks, as they were.
  EXPECT_EQ(job.ranks[1].state, RankState::kRunning);
  EXPECT_EQ(job.ranks[1].error_message, "kept");
  EXPECT_EQ(BeatOf(job.ranks[0]), RankBeat{});
  EXPECT_EQ(BeatOf(job.ranks[2]), (RankBeat{2, -1, std::nullopt, 0}));
}

}  // namespace
}  // namespace ltd

namespace ltd {
namespace {

TEST(ApplyRecord, ASupervisorsRecordLeavesWhatLtdKeepsBesideIt) {
  Job held;
  held.id = "3";
  held.spec.argv = {"/bin/sleep", "60"};
  held.table.gpu_usage = {GpuSample{"0", 10, 100, 5, WallTime{}}};
  held.table.argv_cut = 7;
  Job sent;
  sent.id = "3";
  sent.state = JobState::kRunning;
  sent.record_error = "no space";
  ApplyRecord(held, sent);  // a record past the first: no command line
  EXPECT_EQ(held.state, JobState::kRunning);
  EXPECT_EQ(held.record_error, "no space");
  EXPECT_EQ(held.spec.argv, (std::vector<std::string>{"/bin/sleep", "60"}));
  EXPECT_EQ(held.table.gpu_usage.size(), 1u);
  EXPECT_EQ(held.table.argv_cut, 7u);
  sent.spec.argv = {"/bin/true"};
  ApplyRecord(held, sent);
  EXPECT_EQ(held.spec.argv, std::vector<std::string>{"/bin/true"});
}

// sbatch's end states: each cause's, a remote failure as its node's, and
// old records read as written.
TEST(EndState, SbatchNamesEachEnd) {
  auto end = [](CauseReason r, std::optional<CauseReason> remote = std::nullopt) {
    RootCause cause;
    cause.reason = r;
    cause.remote_reason = remote;
    return EndStateFor(cause);
  };
  EXPECT_EQ(end(CauseReason::kTimeLimit), JobState::kTimeout);
  EXPECT_EQ(end(CauseReason::kOom), JobState::kOutOfMemory);
  EXPECT_EQ(end(CauseReason::kCancelled), JobState::kCancelled);
  EXPECT_EQ(end(CauseReason::kDependencyFailed), JobState::kCancelled);
  EXPECT_EQ(end(CauseReason::kSupervisorLost), JobState::kLost);
  EXPECT_EQ(end(CauseReason::kExited), JobState::kFailed);
  EXPECT_EQ(end(CauseReason::kHang), JobState::kFailed);
  EXPECT_EQ(end(CauseReason::kRemoteFailure, CauseReason::kSupervisorLost), JobState::kNodeFail);
  EXPECT_EQ(end(CauseReason::kRemoteFailure, CauseReason::kTimeLimit), JobState::kTimeout);
  EXPECT_EQ(end(CauseReason::kRemoteFailure, CauseReason::kExited), JobState::kFailed);
  EXPECT_EQ(end(CauseReason::kRemoteFailure), JobState::kFailed) << "a record before";

  for (JobState s : {JobState::kTimeout, JobState::kOutOfMemory, JobState::kNodeFail}) {
    EXPECT_TRUE(IsFinal(s));
    EXPECT_EQ(ParseJobState(ToString(s)), s);
  }
  EXPECT_EQ(ToString(JobState::kOutOfMemory), "OUT_OF_MEMORY");
  EXPECT_EQ(ToString(JobState::kNodeFail), "NODE_FAIL");
  Job job;
  job.id = "3";
  job.state = JobState::kFailed;  // a job past its --time, as a release before wrote it
  job.root_cause = RootCause();
  job.root_cause->reason = CauseReason::kTimeLimit;
  EXPECT_EQ(JobFromJson(ToJson(job))->state, JobState::kFailed);
  job.root_cause->reason = CauseReason::kRemoteFailure;
  job.root_cause->remote_reason = CauseReason::kSupervisorLost;
  EXPECT_EQ(JobFromJson(ToJson(job))->root_cause->remote_reason, CauseReason::kSupervisorLost);
}

// One spelling of enum values in every JSON: ltrun --report's spells
// heartbeat_mode as show --json does; the record keeps the spelling the
// releases before read.
TEST(RecordJson, TheReportSpellsEnumsAsTheApisJson) {
  Job job;
  job.id = "4";
  job.heartbeat_mode = HeartbeatMode::kAutomatic;
  EXPECT_EQ(ToReportJson(job)["heartbeat_mode"], "AUTOMATIC");
  EXPECT_EQ(ToJson(job)["heartbeat_mode"], "automatic");
  job.state = JobState::kTimeout;
  EXPECT_EQ(ToReportJson(job)["state"], "TIMEOUT");
}

}  // namespace
}  // namespace ltd
