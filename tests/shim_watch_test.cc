// What a supervisor's Watch stream carries to ltd (proto/shim.proto):
// output lines (and SetOutput), records, and Beats. Both real sides in one
// process, over a real Unix socket. lt-shim's ShimService runs a JobRunner
// on fake ranks, whose output the test reports itself (the runner's own
// reporting is tested elsewhere) and whose heartbeats it writes; ltd's
// ShimSupervisorHost adopts it as it would after a restart. Both live on
// one libuv loop, run on a thread of the test; the test reaches them only
// through the loop. The supervisor speaks this release's frames
// (SupervisorServer), or gRPC as one of an earlier release did (Served).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "fakes.h"
#include "harness.h"
#include "job_runner.h"
#include "loop.h"
#include "pidfd.h"
#include "shim.grpc.pb.h"
#include "shim_host.h"
#include "shim_service.h"
#include "supervisor_server.h"
#include "write_stream.h"

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
  void OnOutputResumed(bool m) override {
    ++resumed;
    if (m) ++missed;
  }
  void OnEnded(const Job& job) override { ended = job; }
  void OnLost(std::string why) override { lost = why; }
  int records = 0;
  Job last;  // the latest record
  std::vector<std::vector<RankBeat>> beats;
  int resumed = 0;
  int missed = 0;  // of those, ones after which the log alone may hold lines
  std::vector<std::string> lines;
  std::string lost;
  std::optional<Job> ended;  // the final record
};

// A supervisor of an earlier release (api_version 1): ShimService served
// over gRPC, counting SetOutput calls, or (`old_release`) one of a release
// before SetOutput existed. `old_ltd`: the watch comes as from an ltd of a
// release before Beats. `old_records`: the supervisor sends records as
// JSON, as the releases before Record did.
class Served final : public pb::Supervisor::CallbackService {
 public:
  Served(Loop& loop, ShimService& real, bool old_release, bool old_ltd, bool old_records)
      : loop_(loop),
        real_(real),
        old_release_(old_release),
        old_ltd_(old_ltd),
        old_records_(old_records) {}
  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const pb::HelloRequest*,
                                  pb::HelloReply* reply) override {
    *reply = real_.Hello();
    reply->set_api_version(1);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerWriteReactor<pb::Event>* Watch(grpc::CallbackServerContext*,
                                             const pb::WatchRequest* req) override {
    pb::WatchRequest as_asked = *req;
    if (old_ltd_) as_asked = pb::WatchRequest();
    if (old_records_) as_asked.clear_typed_records();
    auto* stream = new Stream();
    auto sink = std::make_shared<Sink>(stream->handle());
    loop_.Post([this, sink, as_asked] {
      sinks_.insert(sink);
      const bool watching = sink->handle->OnGone([this, sink] {
        loop_.Post([this, sink] {
          real_.Unwatch(sink.get());
          sinks_.erase(sink);
        });
      });
      if (watching) real_.Watch(sink.get(), as_asked);
    });
    return stream;
  }
  grpc::ServerUnaryReactor* SetOutput(grpc::CallbackServerContext* ctx,
                                      const pb::SetOutputRequest* req,
                                      pb::SetOutputReply*) override {
    ++set_output_calls;
    auto* reactor = ctx->DefaultReactor();
    // What gRPC answers for a method the service does not have.
    if (old_release_) {
      reactor->Finish(grpc::Status(grpc::UNIMPLEMENTED, ""));
      return reactor;
    }
    loop_.Post([this, reactor, on = req->on()] {
      real_.SetOutput(on);
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }
  std::atomic<int> set_output_calls{0};

 private:
  struct Traits {
    static bool Droppable(const pb::Event& e) { return WatchSink::Droppable(e); }
    static pb::Event Notice(uint64_t dropped) { return WatchSink::DroppedNotice(dropped); }
  };
  using Stream = WriteStream<pb::Event, Traits>;
  struct Sink final : WatchSink {
    explicit Sink(std::shared_ptr<Stream::Handle> h) : handle(std::move(h)) {}
    void Push(const pb::Event& event) override { handle->Push(event); }
    void Finish() override { handle->Finish(grpc::Status::OK); }
    std::shared_ptr<Stream::Handle> handle;
  };
  Loop& loop_;
  ShimService& real_;
  const bool old_release_;
  const bool old_ltd_;
  const bool old_records_;
  std::set<std::shared_ptr<Sink>> sinks_;  // loop thread
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
  enum class Wire {
    kFrames,        // this release's supervisor
    kGrpc,          // an earlier release's, over gRPC
    kGrpcNoOutput,  // and one before SetOutput
  };
  void Start(Wire wire, const std::function<void()>& then = nullptr) {
    const Job& job = job_;
    ShimService::Options so;
    so.job_id = kJobId;
    so.state_dir = std::filesystem::canonical(store_->state_dir());
    service_ = std::make_unique<ShimService>(clock_, so);
    runner_ = std::make_unique<JobRunner>(clock_, launcher_, *store_, nullptr, RunnerConfig{}, job,
                                          *service_);
    loop_thread_ = std::thread([this] { loop_.Run(); });
    if (wire == Wire::kFrames) {
      OnLoop([&] {
        frames_ = std::make_unique<SupervisorServer>(loop_, *service_);
        ASSERT_TRUE(frames_->Listen(store_->JobDir(kJobId) + "/supervisor.sock").ok());
      });
    } else {
      served_ = std::make_unique<Served>(loop_, *service_, wire == Wire::kGrpcNoOutput, old_ltd_,
                                         old_records_);
      grpc::ServerBuilder builder;
      builder.RegisterService(served_.get());
      builder.AddListeningPort("unix:" + store_->JobDir(kJobId) + "/shim.sock",
                               grpc::InsecureServerCredentials());
      server_ = builder.BuildAndStart();
      ASSERT_NE(server_, nullptr);
    }
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
      if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      OnLoop([&] {
        frames_.reset();
        runner_.reset();
        service_.reset();
      });
      loop_.Post([this] { loop_.Stop(); });
      loop_thread_.join();
    }
    std::filesystem::remove_all(dir_);
  }

  void ForwardsNothingWhileOff(Wire wire);

  // SetOutput calls the supervisor took.
  int SetOutputCalls() {
    if (served_) return served_->set_output_calls;
    int n = 0;
    OnLoop([&] { n = service_->set_output_calls(); });
    return n;
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
  std::unique_ptr<SupervisorServer> frames_;
  std::unique_ptr<ShimSupervisorHost> host_;
  std::unique_ptr<Supervision> supervision_;
  Ears heard_;
  std::thread loop_thread_;
};

TEST_F(ShimWatch, ForwardsNothingWhileOffAndResumesWhenOn) {
  ForwardsNothingWhileOff(Wire::kFrames);
}

// A supervisor of the release before frames, adopted across an upgrade.
TEST_F(ShimWatch, AnEarlierReleasesSupervisorOverGrpcForwardsNothingWhileOff) {
  ForwardsNothingWhileOff(Wire::kGrpc);
}

void ShimWatch::ForwardsNothingWhileOff(Wire wire) {
  Start(wire);
  Print("before");  // on by default: an older ltd never asks
  ASSERT_TRUE(Heard("before"));

  OnLoop([&] { supervision_->SetOutput(false); });
  ASSERT_TRUE(Until([&] { return !service_->output_on(); }));
  for (int i = 0; i < 100; ++i) Print("quiet " + std::to_string(i));

  int resumed = 0;
  int missed = 0;
  OnLoop([&] {
    resumed = heard_.resumed;
    missed = heard_.missed;
    supervision_->SetOutput(true);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed == resumed + 1; }));
  // The quiet lines are in the log alone: its readers are told to look.
  OnLoop([&] { EXPECT_EQ(heard_.missed, missed + 1); });
  EXPECT_TRUE(service_->output_on());
  Print("after");
  ASSERT_TRUE(Heard("after"));
  // One stream, in order: a quiet line sent would have come before.
  EXPECT_EQ(heard_.lines, (std::vector<std::string>{"before", "after"}));
  EXPECT_EQ(SetOutputCalls(), 2);
  EXPECT_EQ(heard_.lost, "");
}

TEST_F(ShimWatch, FastTogglesCoalesceIntoTheLatestWish) {
  Start(Wire::kFrames);
  // 1,000 attach/detach in one turn of ltd's loop: the first wish goes out
  // at once, the others wait for its answer and only the last is sent.
  int resumed = 0;
  OnLoop([&] {
    resumed = heard_.resumed;
    for (int i = 0; i < 1000; ++i) supervision_->SetOutput(i % 2 == 1);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed == resumed + 1; }));
  EXPECT_TRUE(service_->output_on());
  EXPECT_EQ(SetOutputCalls(), 2);
  Print("still here");
  EXPECT_TRUE(Heard("still here"));
}

TEST_F(ShimWatch, OffThenOnBeforeTheWatchAnswersAsksNothing) {
  // ltd turns a new job off, and an attach turns it on again, before the
  // supervisor's first event: it sends output from the watch's start, so
  // ltd asks nothing, and output counts as flowing.
  Start(Wire::kFrames, [&] {
    supervision_->SetOutput(false);
    supervision_->SetOutput(true);
  });
  ASSERT_TRUE(Until([&] { return heard_.resumed >= 1; }));
  Print("first");
  ASSERT_TRUE(Heard("first"));
  EXPECT_EQ(SetOutputCalls(), 0);
}

TEST_F(ShimWatch, ASupervisorWithoutSetOutputKeepsSendingEverything) {
  Start(Wire::kGrpcNoOutput);
  OnLoop([&] { supervision_->SetOutput(false); });
  ASSERT_TRUE(WaitFor([&] { return SetOutputCalls() == 1; }, std::chrono::seconds(20)));
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
  EXPECT_EQ(SetOutputCalls(), 1);
  EXPECT_EQ(heard_.lines, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(heard_.lost, "");
}

TEST_F(ShimWatch, ProgressComesAsTheBeatsOfTheRanksThatMovedOnly) {
  job_.spec.devices = 3;
  Start(Wire::kFrames);
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
  Start(Wire::kGrpc);
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
  Start(Wire::kFrames);
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
  Start(Wire::kGrpc);
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
  Start(Wire::kFrames);
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
  Start(Wire::kGrpc);
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
