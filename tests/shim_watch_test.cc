// What a supervisor's Watch stream carries to ltd (proto/shim.proto):
// output lines (and SetOutput), records, and Beats. Both real sides in one
// process, over a real Unix socket. lt-shim's ShimService runs a JobRunner
// on fake ranks, whose output the test reports itself (the runner's own
// reporting is tested elsewhere) and whose heartbeats it writes; ltd's
// ShimSupervisorHost adopts it as it would after a restart. Both live on
// one libuv loop, run on a thread of the test; the test reaches them only
// through the loop.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "fakes.h"
#include "harness.h"
#include "job_runner.h"
#include "loop.h"
#include "pidfd.h"
#include "shim_host.h"
#include "shim_service.h"

namespace ltd::test {
namespace {

namespace pb = shim::v1;

const char kJobId[] = "7";

// What ltd's job table would hear. Loop thread only.
struct Ears final : SupervisionEvents {
  void OnChanged(const Job& job, Change) override {
    ++records;
    last = job;
  }
  void OnBeats(const std::vector<RankBeat>& b) override { beats.push_back(b); }
  void OnOutput(int, Stream, std::string_view line) override { lines.emplace_back(line); }
  void OnOutputResumed() override { ++resumed; }
  void OnEnded(const Job& job) override { ended = job; }
  void OnLost(std::string why) override { lost = why; }
  int records = 0;
  Job last;  // the latest record
  std::vector<std::vector<RankBeat>> beats;
  int resumed = 0;
  std::vector<std::string> lines;
  std::string lost;
  std::optional<Job> ended;  // the final record
};

// The supervisor's service as served: ShimService's, counting SetOutput
// calls, or (`old_release`) one of a release before SetOutput existed.
// `old_ltd`: the watch comes as from an ltd of a release before Beats.
// `old_records`: the supervisor sends records as JSON, as the releases
// before Record did.
class Served final : public pb::Supervisor::CallbackService {
 public:
  Served(ShimService& real, bool old_release, bool old_ltd, bool old_records)
      : real_(real), old_release_(old_release), old_ltd_(old_ltd), old_records_(old_records) {}
  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const pb::HelloRequest* req,
                                  pb::HelloReply* reply) override {
    return real_.Hello(ctx, req, reply);
  }
  grpc::ServerWriteReactor<pb::Event>* Watch(grpc::CallbackServerContext* ctx,
                                             const pb::WatchRequest* req) override {
    const pb::WatchRequest before_beats;
    if (old_ltd_) return real_.Watch(ctx, &before_beats);
    pb::WatchRequest as_asked = *req;
    if (old_records_) as_asked.clear_typed_records();
    return real_.Watch(ctx, &as_asked);
  }
  grpc::ServerUnaryReactor* SetOutput(grpc::CallbackServerContext* ctx,
                                      const pb::SetOutputRequest* req,
                                      pb::SetOutputReply* reply) override {
    ++set_output_calls;
    if (!old_release_) return real_.SetOutput(ctx, req, reply);
    // What gRPC answers for a method the service does not have.
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::UNIMPLEMENTED, ""));
    return reactor;
  }
  std::atomic<int> set_output_calls{0};

 private:
  ShimService& real_;
  const bool old_release_;
  const bool old_ltd_;
  const bool old_records_;
};

class ShimWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-shim-output-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = JobStore::Open(dir_ + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    store_.emplace(std::move(*store));
    ASSERT_TRUE(store_->CreateJobDir(kJobId).ok());
    job_.id = kJobId;
    job_.user = "someone";
    job_.spec.devices = 1;
    job_.spec.argv = {"/bin/true"};
    job_.spec.heartbeat_timeout = std::chrono::minutes(1);
  }

  // Serves the supervisor of job 7 (job_) and has ltd adopt it; its ranks
  // start with the watch. `then` runs on the loop right after the
  // adoption, before the watch brought anything.
  void Start(bool old_release, const std::function<void()>& then = nullptr) {
    const Job& job = job_;
    ShimService::Options so;
    so.job_id = kJobId;
    so.state_dir = std::filesystem::canonical(store_->state_dir());
    service_ = std::make_unique<ShimService>(loop_, clock_, so);
    runner_ = std::make_unique<JobRunner>(clock_, launcher_, *store_, nullptr, RunnerConfig{}, job,
                                          *service_);
    served_ = std::make_unique<Served>(*service_, old_release, old_ltd_, old_records_);
    const std::string socket = store_->JobDir(kJobId) + "/shim.sock";
    grpc::ServerBuilder builder;
    builder.RegisterService(served_.get());
    builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    loop_thread_ = std::thread([this] { loop_.Run(); });
    OnLoop([&] {
      service_->Begin(
          *runner_, [this] { runner_->Start(); }, [] {});
    });

    host_ = std::make_unique<ShimSupervisorHost>(loop_, *store_, PlanContainment(*store_),
                                                 ShimConfig{});
    auto found = host_->Probe({kJobId}, std::chrono::seconds(10));
    ASSERT_EQ(found.count(kJobId), 1u);  // the test's own pid stands for the supervisor's
    OnLoop([&] {
      supervision_ = host_->Adopt(job, std::move(found[kJobId]), heard_);
      if (then) then();
    });
    ASSERT_TRUE(Until([&] { return heard_.records >= 1; }));  // watched
  }

  void TearDown() override {
    if (loop_thread_.joinable()) {
      OnLoop([&] {
        supervision_.reset();
        host_.reset();
      });
      // The watch ends and the service lets go of it on the loop.
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      OnLoop([&] {
        runner_.reset();
        service_.reset();
      });
      loop_.Post([this] { loop_.Stop(); });
      loop_thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }

  // Runs `fn` on the loop and waits for it.
  void OnLoop(const std::function<void()>& fn) {
    std::promise<void> done;
    loop_.Post([&] {
      fn();
      done.set_value();
    });
    ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  }
  // Waits until `pred`, run on the loop, holds.
  bool Until(const std::function<bool()>& pred) {
    return WaitFor(
        [&] {
          bool ok = false;
          OnLoop([&] { ok = pred(); });
          return ok;
        },
        std::chrono::seconds(20));
  }
  // The runner reports a line of rank 0 (as it does after logging it).
  void Print(const std::string& line) {
    OnLoop([&] { service_->OnOutput(0, Stream::kStdout, line); });
  }
  bool Heard(const std::string& line) {
    return Until([&] {
      return std::find(heard_.lines.begin(), heard_.lines.end(), line) != heard_.lines.end();
    });
  }

  // Ends the progress interval: what is due goes out.
  void NextInterval() {
    OnLoop([&] { clock_.Advance(std::chrono::seconds(1)); });
  }
  void Beat(int rank, int step) {
    OnLoop([&] { launcher_.Control(kJobId, rank, "hb " + std::to_string(step) + "\n"); });
  }
  int Records() {
    int n = 0;
    OnLoop([&] { n = heard_.records; });
    return n;
  }

  Job job_;
  bool old_ltd_ = false;
  bool old_records_ = false;
  std::string dir_;
  std::optional<JobStore> store_;
  Loop loop_;
  FakeClock clock_;  // loop thread only; no timer of this test is due
  FakeLauncher launcher_{clock_};
  std::unique_ptr<ShimService> service_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<Served> served_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ShimSupervisorHost> host_;
  std::unique_ptr<Supervision> supervision_;
  Ears heard_;
  std::thread loop_thread_;
};

TEST_F(ShimWatch, ForwardsNothingWhileOffAndResumesWhenOn) {
  Start(/*old_release=*/false);
  Print("before");  // on by default: an older ltd never asks
  ASSERT_TRUE(Heard("before"));

  OnLoop([&] { supervision_->SetOutput(false); });
  ASSERT_TRUE(Until([&] { return !service_->output_on(); }));
  for (int i = 0; i < 100; ++i) Print("quiet " + std::to_string(i));

  int resumed = 0;
  OnLoop([&] {
    resumed = heard_.resumed;
    supervision_->SetOutput(true);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed == resumed + 1; }));
  EXPECT_TRUE(service_->output_on());
  Print("after");
  ASSERT_TRUE(Heard("after"));
  // One stream, in order: a quiet line sent would have come before.
  EXPECT_EQ(heard_.lines, (std::vector<std::string>{"before", "after"}));
  EXPECT_EQ(served_->set_output_calls, 2);
  EXPECT_EQ(heard_.lost, "");
}

TEST_F(ShimWatch, FastTogglesCoalesceIntoTheLatestWish) {
  Start(/*old_release=*/false);
  // 1,000 attach/detach in one turn of ltd's loop: the first wish goes out
  // at once, the others wait for its answer and only the last is sent.
  int resumed = 0;
  OnLoop([&] {
    resumed = heard_.resumed;
    for (int i = 0; i < 1000; ++i) supervision_->SetOutput(i % 2 == 1);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed == resumed + 1; }));
  EXPECT_TRUE(service_->output_on());
  EXPECT_EQ(served_->set_output_calls, 2);
  Print("still here");
  EXPECT_TRUE(Heard("still here"));
}

TEST_F(ShimWatch, OffThenOnBeforeTheWatchAnswersAsksNothing) {
  // ltd turns a new job off, and an attach turns it on again, before the
  // supervisor's first event: it sends output from the watch's start, so
  // ltd asks nothing, and output counts as flowing.
  Start(/*old_release=*/false, [&] {
    supervision_->SetOutput(false);
    supervision_->SetOutput(true);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed >= 1; }));
  Print("first");
  ASSERT_TRUE(Heard("first"));
  EXPECT_EQ(served_->set_output_calls, 0);
}

TEST_F(ShimWatch, ASupervisorWithoutSetOutputKeepsSendingEverything) {
  Start(/*old_release=*/true);
  OnLoop([&] { supervision_->SetOutput(false); });
  ASSERT_TRUE(WaitFor([&] { return served_->set_output_calls == 1; }, std::chrono::seconds(20)));
  Print("one");
  ASSERT_TRUE(Heard("one"));
  // Whether or not ltd has its answer yet, it asks no more: the answer
  // says the supervisor cannot switch, and until it comes the call in
  // flight stands for every later wish.
  OnLoop([&] {
    supervision_->SetOutput(true);
    supervision_->SetOutput(false);
  });
  Print("two");
  ASSERT_TRUE(Heard("two"));
  // A record: where ltd asks again after a call that failed.
  const int records = Records();
  OnLoop([&] { service_->OnChanged(runner_->job(), Change::kCourse); });
  ASSERT_TRUE(Until([&] { return heard_.records > records; }));
  EXPECT_EQ(served_->set_output_calls, 1);
  EXPECT_EQ(heard_.lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(heard_.lost, "");
}

TEST_F(ShimWatch, ProgressComesAsTheBeatsOfTheRanksThatMovedOnly) {
  job_.spec.devices = 3;
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until(
      [&] { return heard_.last.state == JobState::kRunning && heard_.last.ranks.size() == 3; }));
  const int records = Records();

  Beat(0, 5);
  Beat(2, 9);
  Beat(2, 10);
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.beats.size() == 1; }));
  OnLoop([&] {
    const std::vector<RankBeat> want = {BeatOf(runner_->job().ranks[0]),
                                        BeatOf(runner_->job().ranks[2])};
    EXPECT_EQ(heard_.beats[0], want);
    EXPECT_EQ(heard_.beats[0][1].last_step, 10);
    EXPECT_TRUE(heard_.beats[0][1].last_heartbeat_at.has_value());
  });

  // Only what moved since: rank 0.
  Beat(0, 6);
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.beats.size() == 2; }));
  OnLoop([&] {
    ASSERT_EQ(heard_.beats[1].size(), 1u);
    EXPECT_EQ(heard_.beats[1][0].rank, 0);
    EXPECT_EQ(heard_.beats[1][0].last_step, 6);
  });
  EXPECT_EQ(Records(), records);  // no record for beats

  // A clean exit is more than a beat: a record, with the beats since.
  Beat(2, 11);
  OnLoop([&] { launcher_.Exit(kJobId, 1, 0); });
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.records == records + 1; }));
  OnLoop([&] {
    EXPECT_EQ(heard_.last.ranks[1].state, RankState::kExited);
    EXPECT_EQ(heard_.last.ranks[2].last_step, 11);
    EXPECT_EQ(heard_.beats.size(), 2u);
  });

  // Nothing moved: nothing goes out.
  NextInterval();
  Beat(0, 7);
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.beats.size() == 3; }));
  OnLoop(
      [&] { EXPECT_EQ(heard_.beats[2], std::vector<RankBeat>{BeatOf(runner_->job().ranks[0])}); });
  EXPECT_EQ(Records(), records + 1);
}

TEST_F(ShimWatch, AnLtdOfAnEarlierReleaseGetsProgressAsRecords) {
  old_ltd_ = true;
  job_.spec.devices = 2;
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until([&] { return heard_.last.ranks.size() == 2; }));
  const int records = Records();
  Beat(1, 4);
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.records == records + 1; }));
  OnLoop([&] {
    EXPECT_EQ(heard_.last.ranks[1].last_step, 4);
    EXPECT_EQ(heard_.last.ranks[0].last_step, -1);
    EXPECT_TRUE(heard_.beats.empty());
  });
}

// A record with a 2 MB command line is not sent again each second: past
// the first of a watch, records to an ltd of this release leave it out
// (ltd keeps its own); to an ltd of an earlier release, every record has it.
TEST_F(ShimWatch, RecordsAfterTheFirstLeaveOutTheCommandLine) {
  job_.spec.devices = 2;
  job_.spec.argv = {"/bin/true", std::string(100000, 'a')};
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until([&] { return heard_.last.state == JobState::kRunning; }));
  const int records = Records();
  OnLoop([&] { launcher_.Exit(kJobId, 1, 0); });  // a record's worth
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.records == records + 1; }));
  OnLoop([&] {
    EXPECT_EQ(heard_.last.ranks[1].state, RankState::kExited);
    EXPECT_TRUE(heard_.last.spec.argv.empty()) << "the command line was sent again";
  });
}

TEST_F(ShimWatch, AnLtdOfAnEarlierReleaseGetsTheCommandLineInEveryRecord) {
  old_ltd_ = true;
  job_.spec.devices = 2;
  job_.spec.argv = {"/bin/true", "x"};
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until([&] { return heard_.last.state == JobState::kRunning; }));
  const int records = Records();
  OnLoop([&] { launcher_.Exit(kJobId, 1, 0); });
  NextInterval();
  ASSERT_TRUE(Until([&] { return heard_.records == records + 1; }));
  OnLoop([&] { EXPECT_EQ(heard_.last.spec.argv, job_.spec.argv); });
}

// The final record crosses typed, saying that the disk refused it, so
// that ltd saves it.
TEST_F(ShimWatch, TheFinalRecordSaysWhetherItWasSaved) {
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until([&] { return heard_.last.state == JobState::kRunning; }));
  const std::string tmp = store_->JobDir(kJobId) + "/job.json.tmp";
  ASSERT_TRUE(std::filesystem::create_directory(tmp));  // no record can be written
  OnLoop([&] {
    launcher_.Exit(kJobId, 0, 5);
    clock_.Advance(Millis(0));
  });
  ASSERT_TRUE(Until([&] { return heard_.ended.has_value(); }));
  OnLoop([&] {
    EXPECT_EQ(heard_.ended->state, JobState::kFailed);
    EXPECT_EQ(heard_.ended->exit_code, 5);
    EXPECT_NE(heard_.ended->record_error.find("job.json.tmp"), std::string::npos)
        << heard_.ended->record_error;
    EXPECT_EQ(heard_.ended->spec.argv, job_.spec.argv);  // whole, for ltd to save
  });
  std::filesystem::remove(tmp);
}

// A supervisor of the release before Record sends every record as JSON:
// ltd follows the job and takes its end as before.
TEST_F(ShimWatch, ASupervisorOfTheReleaseBeforeRecordIsWatchedAsBefore) {
  old_records_ = true;
  job_.spec.devices = 2;
  Start(/*old_release=*/false);
  ASSERT_TRUE(Until(
      [&] { return heard_.last.state == JobState::kRunning && heard_.last.ranks.size() == 2; }));
  OnLoop([&] {
    launcher_.Exit(kJobId, 0, 0);
    launcher_.Exit(kJobId, 1, 0);
    clock_.Advance(Millis(0));
  });
  ASSERT_TRUE(Until([&] { return heard_.ended.has_value(); }));
  OnLoop([&] {
    EXPECT_EQ(heard_.ended->state, JobState::kSucceeded);
    EXPECT_EQ(heard_.ended->record_error, "");
    EXPECT_EQ(heard_.ended->spec.argv, job_.spec.argv);
  });
}

}  // namespace
}  // namespace ltd::test
