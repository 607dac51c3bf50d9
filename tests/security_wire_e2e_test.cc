// Security end to end, the wire: invalid and random input sent past ltctl
// with a raw gRPC client is refused and never hurts ltd.
#include "security_fixture.h"

namespace ltd::test {
namespace {

// ---- 16. input on the wire ----
//
// Written against proto/ltd.proto as it is today (SubmitRequest's
// devices/grace_ms/heartbeat_timeout_ms/startup_timeout_ms/max_restarts,
// KillRequest.signal, LogsRequest.rank/tail). Adapt WireCases() alone when
// the API changes.

struct WireCase {
  std::string what;
  std::function<grpc::Status(v1::Ltd::Stub&, std::string* accepted)> call;
};

std::unique_ptr<grpc::ClientContext> Deadline() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return ctx;
}

grpc::Status CallSubmit(v1::Ltd::Stub& api, const v1::SubmitRequest& req, std::string* accepted) {
  auto ctx = Deadline();
  auto reader = api.Submit(ctx.get(), req);
  v1::JobEvent ev;
  while (reader->Read(&ev)) {
    if (ev.event_case() == v1::JobEvent::kAccepted) *accepted = ev.accepted();
  }
  return reader->Finish();
}

std::vector<WireCase> WireCases(const std::string& child, const std::string& marker,
                                const std::string& running_job) {
  auto base = [=] {
    v1::SubmitRequest r;
    r.set_devices(1);
    r.add_argv(child);
    r.add_argv("exit:0");
    r.set_cwd("/");
    r.add_env(marker);
    r.set_grace_ms(1000);
    r.set_detach(true);
    return r;
  };
  auto submit = [=](std::string what, std::function<void(v1::SubmitRequest&)> change) {
    return WireCase{what, [=](v1::Ltd::Stub& api, std::string* accepted) {
                      v1::SubmitRequest r = base();
                      change(r);
                      return CallSubmit(api, r, accepted);
                    }};
  };
  constexpr int64_t kMax = INT64_MAX;
  std::vector<WireCase> cases = {
      submit("grace -1", [](auto& r) { r.set_grace_ms(-1); }),
      submit("heartbeat timeout -1", [](auto& r) { r.set_heartbeat_timeout_ms(-1); }),
      submit("startup timeout -1", [](auto& r) { r.set_startup_timeout_ms(-1); }),
      submit("grace INT64_MAX ms", [](auto& r) { r.set_grace_ms(kMax); }),
      submit("heartbeat timeout INT64_MAX ms", [](auto& r) { r.set_heartbeat_timeout_ms(kMax); }),
      submit("startup timeout INT64_MAX ms", [](auto& r) { r.set_startup_timeout_ms(kMax); }),
      submit("devices 0", [](auto& r) { r.set_devices(0); }),
      submit("devices -1", [](auto& r) { r.set_devices(-1); }),
      submit("devices INT32_MAX", [](auto& r) { r.set_devices(INT32_MAX); }),
      submit("max_restarts -1", [](auto& r) { r.set_max_restarts(-1); }),
      submit("max_restarts INT32_MAX", [](auto& r) { r.set_max_restarts(INT32_MAX); }),
      submit("no argv", [](auto& r) { r.clear_argv(); }),
      submit("relative cwd", [](auto& r) { r.set_cwd("tmp"); }),
      submit("--env without '='", [](auto& r) { r.add_extra_env("NOEQUALS"); }),
  };
  for (int sig : {99, -1, 65}) {
    cases.push_back({"kill signal " + std::to_string(sig), [=](v1::Ltd::Stub& api, std::string*) {
                       auto ctx = Deadline();
                       v1::KillRequest req;
                       req.set_job(running_job);
                       req.set_signal(sig);
                       v1::KillReply reply;
                       return api.Kill(ctx.get(), req, &reply);
                     }});
  }
  auto logs = [=](std::string what, int rank, int64_t tail) {
    return WireCase{what, [=](v1::Ltd::Stub& api, std::string*) {
                      auto ctx = Deadline();
                      v1::LogsRequest req;
                      req.set_job(running_job);
                      req.set_rank(rank);
                      req.set_tail(tail);
                      auto reader = api.Logs(ctx.get(), req);
                      v1::JobEvent ev;
                      while (reader->Read(&ev)) {
                      }
                      return reader->Finish();
                    }};
  };
  cases.push_back(logs("logs rank -5", -5, 0));
  cases.push_back(logs("logs rank INT32_MAX", INT32_MAX, 0));
  cases.push_back(logs("logs tail -1", -1, -1));
  cases.push_back({"show of an empty job", [](v1::Ltd::Stub& api, std::string*) {
                     auto ctx = Deadline();
                     v1::JobRef req;
                     v1::Job reply;
                     return api.Show(ctx.get(), req, &reply);
                   }});
  return cases;
}

TEST_F(Security, InvalidInputOnTheWireIsRefused) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string running =
      TrimEnd(d_.Ctl({"submit", "-d", "--devices", "1", "--", child_, "hang"}).out);
  ASSERT_TRUE(WaitState(running, "RUNNING"));
  auto api = v1::Ltd::NewStub(
      grpc::CreateChannel("unix:" + d_.socket(), grpc::InsecureChannelCredentials()));
  for (const WireCase& c : WireCases(child_, d_.marker(), running)) {
    std::string accepted;
    const grpc::Status s = c.call(*api, &accepted);
    EXPECT_FALSE(s.ok()) << c.what << ": accepted" << (accepted.empty() ? "" : " as job ")
                         << accepted;
    EXPECT_TRUE(accepted.empty()) << c.what << ": job " << accepted << " was made";
    if (!s.ok()) {
      EXPECT_FALSE(s.error_message().empty()) << c.what << ": refused without a message";
      EXPECT_FALSE(Has(s.error_message(), "\n")) << c.what << ": " << s.error_message();
    }
    ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died on: " << c.what;
  }
  nlohmann::json all = AllJobs();
  EXPECT_EQ(all.size(), 1u) << "jobs were made: " << all.size() - 1;
  nlohmann::json job = d_.Show(running);
  EXPECT_EQ(job["state"], "RUNNING") << "the running job was changed";
  EXPECT_TRUE(job["ranks"][0]["signal"].is_null()) << "the running job was signalled";
  d_.Ctl({"kill", running});
  d_.WaitEnded(running);
}

// `ps` of many jobs comes a page at a time, each built once the client
// has taken the one before: a stream whose client does not read holds a
// page of ltd's memory (at most 1 MiB), not the whole listing. Before, 64
// such streams over 1,000 jobs held 340 MB for as long as they stayed
// open. Seen from a client that takes little at a time (a small HTTP/2
// window): a job made while it reads the second page is in the third.
TEST_F(Security, AListingIsBuiltAPageAtATimeAsItIsRead) {
  ASSERT_TRUE(StartLtd({"--user-max-pending-jobs", "2000"})) << d_.log();
  const std::string running =
      TrimEnd(d_.Ctl({"submit", "-d", "--devices", "1", "--", child_, "hang"}).out);
  ASSERT_TRUE(WaitState(running, "RUNNING"));
  // 1,200 tasks waiting on it: more than two pages (500 jobs each).
  std::vector<std::string> arrays;
  for (int i = 0; i < 2; ++i) {
    CmdResult array = d_.Ctl({"submit", "--array", "0-599", "--after", running, "--devices", "1",
                              "--", child_, "exit:0"});
    ASSERT_EQ(array.exit_code, 0) << array.err;
    arrays.push_back(TrimEnd(array.out));
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto api = v1::Ltd::NewStub(
      grpc::CreateCustomChannel("unix:" + d_.socket(), grpc::InsecureChannelCredentials(), args));
  auto ctx = Deadline();
  v1::ListRequest req;
  req.set_all(true);
  auto reader = api->List(ctx.get(), req);
  v1::ListReply page;
  ASSERT_TRUE(reader->Read(&page));
  int jobs = page.jobs_size();
  ASSERT_LT(jobs, 1201) << "one page held the whole listing";
  CmdResult made =
      d_.Ctl({"submit", "-d", "--after", running, "--devices", "1", "--", child_, "exit:0"});
  const std::string later = TrimEnd(made.out);
  ASSERT_FALSE(later.empty()) << made.err;
  int pages = 1;
  bool later_listed = false;
  while (reader->Read(&page)) {
    ++pages;
    jobs += page.jobs_size();
    for (const v1::Job& job : page.jobs()) later_listed |= job.id() == later;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_GE(pages, 3);
  EXPECT_EQ(jobs, 1202);
  EXPECT_TRUE(later_listed) << "job " << later << ", made while the second page was read";
  for (const std::string& id : arrays) d_.Ctl({"kill", id});
  d_.Ctl({"kill", later});
  d_.Ctl({"kill", running});
  d_.WaitEnded(running);
}

// ---- 17. random bytes everywhere ----

// The fuzzing client (tests/fuzz_client.cc) runs as user A and sends
// random submits for a while; ltd must stay up, answer for every job, stop
// with exit status 0 and reload every record.
TEST_F(Security, RandomBytesThroughEveryInputNeverHurtLtd) {
  uint64_t seed =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) %
      1000000007;
  if (const char* s = std::getenv("LT_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::fprintf(stderr, "LT_FUZZ_SEED=%llu (set it to replay this run)\n",
               static_cast<unsigned long long>(seed));
  RecordProperty("LT_FUZZ_SEED", std::to_string(seed));
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string work = bin_.path() + "/fuzz";
  mkdir(work.c_str(), 0777);
  chmod(work.c_str(), 0777);
  const std::string client = bin_.Copy(LT_FUZZ_CLIENT);

  CmdResult run = RunCommandAs(
      a_->As(work), {client, d_.socket(), d_.marker(), work, std::to_string(seed), "15"}, {}, 120s);
  EXPECT_EQ(run.exit_code, 0) << run.err << "; seed " << seed;
  ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died; LT_FUZZ_SEED=" << seed;
  size_t accepted = 0, refused = 0, silent = 0;
  std::istringstream report(run.out);
  for (std::string line; std::getline(report, line);) {
    if (line.starts_with("accepted ")) ++accepted;
    if (line.starts_with("refused ")) ++refused;
    if (line.starts_with("refused-without-message ")) ++silent;
  }
  std::fprintf(stderr, "fuzz: %zu submits accepted, %zu refused\n", accepted, refused + silent);
  EXPECT_GT(accepted + refused + silent, 0u);
  EXPECT_EQ(silent, 0u) << "submits refused with an empty message; seed " << seed;

  // Whatever is left running is ended; then ltd answers for every job, and
  // every record reads back after a restart.
  for (const auto& j : AllJobs()) {
    const std::string st = j.value("state", "");
    if (st == "RUNNING" || st == "PENDING") d_.Ctl({"kill", j.value("id", "")});
  }
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const auto& j : AllJobs()) {
          const std::string st = j.value("state", "");
          if (st == "RUNNING" || st == "PENDING") return false;
        }
        return true;
      },
      120s))
      << "jobs still running after their kill; seed " << seed;
  CmdResult ps = d_.Ctl({"ps", "-a"}, 60s);
  EXPECT_EQ(ps.exit_code, 0) << ps.err << "; seed " << seed;
  std::set<std::string> ids;
  for (const auto& j : AllJobs()) ids.insert(j.value("id", ""));
  EXPECT_GE(ids.size(), accepted) << "accepted jobs are missing from ps -a; seed " << seed;
  // `ps -a` read every record; `show` and `logs` a spread of them (all of
  // them would be a thousand ltctl runs on two cores).
  size_t n = 0;
  for (const std::string& id : ids) {
    if (n++ % std::max<size_t>(1, ids.size() / 50) != 0) continue;
    CmdResult show = d_.Ctl({"show", id});
    EXPECT_EQ(show.exit_code, 0) << "show " << id << ": " << show.err << "; seed " << seed;
    CmdResult logs = d_.Ctl({"logs", id, "--tail", "5"});
    EXPECT_EQ(logs.exit_code, 0) << "logs " << id << ": " << logs.err << "; seed " << seed;
  }
  ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died; LT_FUZZ_SEED=" << seed;
  EXPECT_EQ(d_.Stop(60s), 0) << "seed " << seed;
  ASSERT_TRUE(StartLtd()) << d_.log();
  std::set<std::string> reloaded;
  for (const auto& j : AllJobs()) reloaded.insert(j.value("id", ""));
  EXPECT_EQ(reloaded, ids) << "records did not all reload; seed " << seed;
}

}  // namespace
}  // namespace ltd::test
