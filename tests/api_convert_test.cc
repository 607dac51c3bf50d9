// The service adapter's conversions: requests checked field by field into
// the job model, and jobs turned into bounded display text.
#include "api_convert.h"

#include <gtest/gtest.h>

#include <cctype>
#include <optional>

#include "bytes.h"
#include "job_privacy.h"

namespace ltd {
namespace {

using namespace std::string_literals;

v1::SubmitRequest GoodRequest() {
  v1::SubmitRequest req;
  req.set_devices(2);
  req.add_argv("/bin/true");
  req.set_cwd("/tmp");
  req.add_env("PATH=/bin");
  req.set_grace_ms(1000);
  return req;
}

std::string ErrorOf(const v1::SubmitRequest& req) {
  auto spec = SpecFromRequest(req);
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(SpecFromRequest, KeepsBytesExactly) {
  v1::SubmitRequest req = GoodRequest();
  req.set_name("n");
  req.add_argv("caf\xE9");
  req.set_cwd("/tmp/caf\xE9");
  req.add_env("OLDPWD=/tmp/caf\xE9");
  req.add_extra_env("K=v\xE9");
  req.add_extra_env("PATH=/usr/bin");
  auto spec = SpecFromRequest(req);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"/bin/true", "caf\xE9"}));
  EXPECT_EQ(spec->cwd, "/tmp/caf\xE9");
  EXPECT_EQ(spec->env,
            (std::vector<std::string>{"OLDPWD=/tmp/caf\xE9", "K=v\xE9", "PATH=/usr/bin"}));
  EXPECT_EQ(spec->grace, std::chrono::milliseconds(1000));
}

TEST(SpecFromRequest, EachEnvReplacesItsKeyAndTheLastOfAKeyWins) {
  v1::SubmitRequest req = GoodRequest();
  req.clear_env();
  for (const char* e : {"A=1", "B=2", "A=3", "NOEQUALS", "AB=4", "A"}) req.add_env(e);
  for (const char* e : {"A=x", "D=1", "A=y", "B=", "D=2=3"}) req.add_extra_env(e);
  auto spec = SpecFromRequest(req);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->env, (std::vector<std::string>{"NOEQUALS", "AB=4", "A", "A=y", "B=", "D=2=3"}));
}

TEST(SpecFromRequest, MoreStringsThanAJobTakesAreRefusedBeforeAnyIsLookedAt) {
  // A request of 2 million empty strings and 1,024 --env would have each
  // --env walk them all (ValidateSpec refused the count only later).
  v1::SubmitRequest req = GoodRequest();
  for (int i = 0; i < 20'000; ++i) req.add_env("");
  req.add_env("A=" + "\0"s);  // past the bound: never reached
  for (int i = 0; i < 1024; ++i) req.add_extra_env("A=1");
  const std::string error = ErrorOf(req);
  EXPECT_NE(error.find("the program has 1 arguments and 20002 environment strings; ltd takes at "
                       "most 16384 together"),
            std::string::npos)
      << "got: " << error;
  req.clear_env();
  for (int i = 0; i < 16'383; ++i) req.add_env("");
  EXPECT_EQ(ErrorOf(req), "");
}

TEST(SpecFromRequest, SaysWhichFieldIsWrongAndWhatToDo) {
  struct Case {
    std::function<void(v1::SubmitRequest&)> spoil;
    std::string error;
  };
  const std::string nul = "a\0b"s;
  const std::vector<Case> cases = {
      {[&](auto& r) { r.add_argv("x"), r.add_argv(nul); },
       "argv[2] contains a NUL byte; POSIX arguments cannot"},
      {[&](auto& r) { r.set_argv(0, nul); }, "argv[0] (PROGRAM) contains a NUL byte"},
      {[&](auto& r) { r.add_argv(std::string(200'000, 'x')); },
       "argv[1] is 200000 bytes; Linux passes at most 131072"},
      {[&](auto& r) { r.set_cwd("/tmp/" + nul); }, "the working directory contains a NUL byte"},
      {[&](auto& r) { r.set_cwd("/" + std::string(5000, 'd')); },
       "the working directory is 5001 bytes"},
      {[&](auto& r) { r.add_env("A=" + nul); }, "env[1] (the client's environment) contains a NUL"},
      {[&](auto& r) { r.add_extra_env("K=" + nul); }, "--env K contains a NUL byte"},
      {[&](auto& r) { r.add_extra_env("NOEQUALS\xE9"); },
       "--env takes KEY=VALUE, got 'NOEQUALS\\xE9'"},
      {[&](auto& r) { r.add_extra_env("=v"); }, "--env takes KEY=VALUE, got '=v'"},
      {[&](auto& r) { r.set_name(std::string(1000, 'n')); }, "--name is 1000 bytes"},
  };
  for (const Case& c : cases) {
    v1::SubmitRequest req = GoodRequest();
    c.spoil(req);
    const std::string error = ErrorOf(req);
    EXPECT_NE(error.find(c.error), std::string::npos) << "got: " << error;
    EXPECT_TRUE(IsValidUtf8(error)) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

TEST(CheckJobRef, RefusesGarbageWithOneLine) {
  EXPECT_TRUE(CheckJobRef("12").ok());
  EXPECT_TRUE(CheckJobRef("caf\xE9").ok());  // a name is bytes; Resolve says if there is none
  EXPECT_NE(CheckJobRef("").message().find("no job given"), absl::string_view::npos);
  EXPECT_NE(CheckJobRef("1\0"s).message().find("NUL byte"), absl::string_view::npos);
  EXPECT_NE(CheckJobRef(std::string(4096, 'j')).message().find("is 4096 bytes"),
            absl::string_view::npos);
}

Job SomeJob() {
  Job job;
  job.id = "5";
  job.state = JobState::kRunning;
  job.spec.name = "n";
  job.spec.argv = {"/bin/prog", "caf\xE9"};
  job.spec.cwd = "/tmp/caf\xE9";
  job.user = "alice";
  Rank r;
  r.state = RankState::kRunning;
  r.last_step = 7;
  r.error_message = "oops \xFF";
  job.ranks = {r, Rank{}};
  RootCause cause;
  cause.rank = -1;
  cause.reason = CauseReason::kCancelled;
  cause.message = "error caf\xE9";
  job.root_cause = cause;
  return job;
}

TEST(JobToProto, TextIsValidUtf8WithInvalidBytesEscaped) {
  v1::Job view;
  ToProto(SomeJob(), kShowLimits, &view);
  EXPECT_EQ(view.state(), v1::Job::RUNNING);
  ASSERT_EQ(view.argv_size(), 2);
  EXPECT_EQ(view.argv(1), "caf\\xE9");
  EXPECT_FALSE(view.argv_truncated());
  EXPECT_EQ(view.cwd(), "/tmp/caf\\xE9");
  EXPECT_EQ(view.root_cause().message(), "error caf\\xE9");
  EXPECT_FALSE(view.root_cause().has_rank());  // no rank to blame
  EXPECT_EQ(view.root_cause().reason(), v1::RootCause::cancelled);
  EXPECT_EQ(view.ranks(0).error(), "oops \\xFF");
  EXPECT_TRUE(view.ranks(0).has_last_step());
  EXPECT_FALSE(view.ranks(1).has_last_step());
  EXPECT_FALSE(view.has_exit_code());
  EXPECT_FALSE(view.has_ended_at());
  // What protobuf would refuse to parse never leaves ltd.
  v1::Job back;
  ASSERT_TRUE(back.ParseFromString(view.SerializeAsString()));
}

TEST(JobToProto, AHugeCommandIsCutWithAMarkAndAFlag) {
  Job job = SomeJob();
  job.spec.argv = {"/bin/prog"};
  for (int i = 0; i < 7000; ++i) job.spec.argv.push_back(std::string(99, 'a' + i % 26));
  size_t total = 0;
  for (const auto& a : job.spec.argv) total += a.size();

  v1::Job list_view;
  ToProto(job, kListLimits, &list_view);
  EXPECT_TRUE(list_view.argv_truncated());
  size_t shown = 0, text = 0;
  for (int i = 0; i + 1 < list_view.argv_size(); ++i) {
    shown += list_view.argv(i).size();
    text += list_view.argv(i).size();
  }
  EXPECT_LE(text, kListLimits.argv_text);
  EXPECT_EQ(list_view.argv(list_view.argv_size() - 1), ElisionMark(total - shown));
  EXPECT_LT(list_view.ByteSizeLong(), 2000u);

  v1::Job show_view;
  ToProto(job, kShowLimits, &show_view);
  EXPECT_TRUE(show_view.argv_truncated());
  EXPECT_LT(show_view.ByteSizeLong(), kShowLimits.argv_text + 4096);

  job.spec.argv = {"/bin/prog", "short"};
  v1::Job small;
  ToProto(job, kListLimits, &small);
  EXPECT_FALSE(small.argv_truncated());
  EXPECT_EQ(small.argv_size(), 2);
}

// A rank that ran shows its recent pace; one that ended, its average over
// its run, not 0.
TEST(JobToProto, StepsPerSecondIsTheRecentPaceThenTheAverage) {
  Job job = SomeJob();
  const WallTime start = WallTime(std::chrono::seconds(1'800'000'000));
  job.ranks[0].started_at = start;
  job.ranks[0].last_heartbeat_at = start + std::chrono::seconds(20);
  job.ranks[0].last_step = 50;
  job.ranks[0].steps_per_second = 4;
  v1::Job out;
  ToProto(job, kShowLimits, &out);
  EXPECT_DOUBLE_EQ(out.ranks(0).steps_per_second(), 4);
  job.state = JobState::kSucceeded;
  job.ranks[0].state = RankState::kExited;
  out.Clear();
  ToProto(job, kShowLimits, &out);
  EXPECT_DOUBLE_EQ(out.ranks(0).steps_per_second(), 2.5);
  EXPECT_DOUBLE_EQ(out.ranks(1).steps_per_second(), 0);  // never stepped
}

// A run may have 65,536 nodes: a view holds them up to its bytes for
// nodes (`ps` 4 KiB, `show` 1 MiB) and says how many more there are; who
// cancelled a cause is cut as its message is.
TEST(JobToProto, ARunsNodesAreShownUpToTheViewsBytesThenCounted) {
  Job job = SomeJob();
  RootCause cause;
  cause.reason = CauseReason::kCancelled;
  cause.message = std::string(256, 'm');
  cause.cancelled_by = std::string(5'000, '\xff');  // 4 bytes a byte as escapes
  for (int i = 0; i < 2'000; ++i) {
    NodeStatus n;
    n.node_rank = i;
    n.host = std::string(256, 'h');
    n.state = "CANCELLED";
    n.root_cause = cause;
    job.nodes.push_back(n);
  }
  for (const ViewLimits& limits : {kListLimits, kShowLimits}) {
    v1::Job out;
    ToProto(job, limits, &out);
    ASSERT_GT(out.nodes_size(), 0);
    EXPECT_GT(out.nodes_not_shown(), 0);
    EXPECT_EQ(out.nodes_size() + out.nodes_not_shown(), 2'000);
    size_t bytes = 0;
    for (const v1::NodeStatus& n : out.nodes()) bytes += n.ByteSizeLong();
    EXPECT_LE(bytes, limits.nodes + out.nodes(0).ByteSizeLong());
    EXPECT_EQ(out.nodes(out.nodes_size() - 1).node_rank(), out.nodes_size() - 1);
    EXPECT_LE(out.nodes(0).root_cause().cancelled_by().size(), limits.text + 32);
    EXPECT_LT(out.ByteSizeLong(), 4u << 20) << "gRPC's limit of a reply";
  }
  job.nodes.resize(3);
  v1::Job few;
  ToProto(job, kShowLimits, &few);
  EXPECT_EQ(few.nodes_size(), 3);
  EXPECT_EQ(few.nodes_not_shown(), 0);
}

TEST(JobToProto, EndedCarriesTheTypedStateAndCause) {
  Job job = SomeJob();
  job.state = JobState::kCancelled;
  job.exit_code = 130;
  v1::Ended ended;
  FillEnded(job, &ended);
  EXPECT_EQ(ended.state(), v1::Job::CANCELLED);
  EXPECT_EQ(ended.exit_code(), 130);
  EXPECT_EQ(ended.root_cause().message(), "error caf\\xE9");
}

// The proto's values are found by the model's names (model/job.cc): a
// value either side renames or adds without the other would be
// UNSPECIFIED here.
template <typename E, typename P>
void ExpectEveryValueNamedAlike(int count, P (*to_proto)(E), const std::string& (*name)(P),
                                std::optional<E> unnamed = std::nullopt) {
  for (int i = 0; i < count; ++i) {
    const E e = static_cast<E>(i);
    const P p = to_proto(e);
    if (e == unnamed) {
      EXPECT_EQ(static_cast<int>(p), 0);
      continue;
    }
    EXPECT_NE(static_cast<int>(p), 0) << ToString(e);
    std::string model(ToString(e)), proto = name(p);
    for (char& c : model) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (char& c : proto) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(proto, model);
  }
  EXPECT_EQ(ToString(static_cast<E>(count)), "UNKNOWN") << "a value this test does not know";
}

TEST(EnumsToProto, EveryModelValueIsTheProtoValueOfItsName) {
  ExpectEveryValueNamedAlike<JobState, v1::Job::State>(7, &ToProto, &v1::Job::State_Name);
  // sbatch's end states, numbered apart from the rest (model/job.h).
  for (JobState s : {JobState::kTimeout, JobState::kOutOfMemory, JobState::kNodeFail}) {
    EXPECT_EQ(v1::Job::State_Name(ToProto(s)), ToString(s));
  }
  ExpectEveryValueNamedAlike<RankState, v1::Rank::State>(6, &ToProto, &v1::Rank::State_Name);
  ExpectEveryValueNamedAlike<CauseReason, v1::RootCause::Reason>(12, &ToProto,
                                                                 &v1::RootCause::Reason_Name);
  ExpectEveryValueNamedAlike<StackStatus, v1::HangReport::Rank::StackStatus>(
      5, &ToProto, &v1::HangReport::Rank::StackStatus_Name, StackStatus::kUnknown);
  ExpectEveryValueNamedAlike<HeartbeatMode, v1::Job::HeartbeatMode>(3, &ToProto,
                                                                    &v1::Job::HeartbeatMode_Name);
}

// Another user's job keeps its owner, state and the cause's kind; every
// text of its own goes, each field that had some named in `hidden`.
TEST(JobPrivacy, HidesEveryDetailAndNamesWhatItHid) {
  v1::Job j;
  j.set_id("7");
  j.set_user("alice");
  j.set_state(v1::Job::FAILED);
  j.add_argv("/usr/bin/python3");
  j.add_argv("train.py");
  j.add_argv("--token=s3cret");
  j.set_argv_truncated(true);
  j.set_cwd("/home/alice/secret");
  j.set_output("/home/alice/out-%j.log");
  j.mutable_root_cause()->set_reason(v1::RootCause::exited);
  j.mutable_root_cause()->set_message("token s3cret refused");
  j.add_attempts()->mutable_root_cause()->set_message("first: s3cret");
  j.add_nodes()->mutable_root_cause()->set_message("node: s3cret");
  j.add_ranks()->set_error("rank: s3cret");
  j.mutable_hang_report()->add_ranks()->set_stack("frame s3cret");
  j.add_unkillable()->set_stack("kernel s3cret");
  j.set_label("launch train(token='s3cret')");
  j.set_rdzv_refused_last("a record by s3cret");
  auto* cut = j.mutable_errors()->add_cut();
  cut->set_name("s3cret.json");
  cut->set_size(10);

  HideOthersDetails(&j);
  EXPECT_EQ(j.id(), "7");
  EXPECT_EQ(j.user(), "alice");
  EXPECT_EQ(j.state(), v1::Job::FAILED);
  EXPECT_EQ(j.root_cause().reason(), v1::RootCause::exited);
  ASSERT_EQ(j.argv_size(), 1);
  EXPECT_EQ(j.argv(0), "/usr/bin/python3");
  EXPECT_FALSE(j.argv_truncated());
  EXPECT_FALSE(j.has_hang_report());
  EXPECT_EQ(j.DebugString().find("s3cret"), std::string::npos) << j.DebugString();
  const std::vector<std::string> hidden(j.hidden().begin(), j.hidden().end());
  EXPECT_EQ(hidden,
            (std::vector<std::string>{"cwd", "argv", "output", "label", "rdzv_refused_last",
                                      "errors.cut.name", "root_cause.message",
                                      "attempts.root_cause.message", "nodes.root_cause.message",
                                      "ranks.error", "hang_report", "unkillable.stack"}));
  EXPECT_EQ(j.errors().cut(0).size(), 10u) << "its size is no secret";

  // Nothing there, nothing named: `hidden` says only what was hidden.
  v1::Job bare;
  bare.add_argv("/bin/true");
  HideOthersDetails(&bare);
  EXPECT_TRUE(bare.hidden().empty());
}

}  // namespace
}  // namespace ltd
