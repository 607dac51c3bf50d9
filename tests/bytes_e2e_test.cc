// POSIX strings are bytes, end to end: arguments, environment, working
// directory and a rank's error text that are not UTF-8 reach the rank and
// the records exactly, never harm ltd, and show up escaped; `ps` stays
// usable whatever the number and size of the records; a raw gRPC client
// sending garbage gets one-line errors.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "bytes.h"
#include "e2e_fixture.h"
#include "job.h"
#include "ltd.grpc.pb.h"

namespace ltd::test {
namespace {

using namespace std::string_literals;

const std::string kChild = TestChildPath();

class BytesE2E : public E2E {
 protected:
  // ltctl started in `dir` by env(1), with `vars` (K=V) set in its environment.
  CmdResult CtlIn(const std::string& dir, const std::vector<std::string>& vars,
                  const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/env", "-C", dir};
    argv.insert(argv.end(), vars.begin(), vars.end());
    argv.insert(argv.end(), {LtctlPath(), "--socket", d_.socket()});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {d_.marker()}, 30s);
  }

  nlohmann::json Json(const CmdResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 2000);
    return j;
  }
};

TEST_F(BytesE2E, ArgvEnvCwdAndClientEnvironmentThatAreNoUtf8ReachTheRankExactly) {
  const std::string dir = d_.dir() + "/caf\xE9";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  CmdResult env = CtlIn(dir, {"OLDPWD=/tmp/caf\xE9"},
                        {"submit", "--devices", "1", "--env", "LT_TEST_EXTRA=v\xE9", "--", kChild,
                         "--rank", "9", "x\xFFy", "getenv:OLDPWD,getenv:LT_TEST_EXTRA,cwd"});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_NE(env.out.find("[0] OLDPWD=/tmp/caf\xE9\n"), std::string::npos) << env.out;
  EXPECT_NE(env.out.find("[0] LT_TEST_EXTRA=v\xE9\n"), std::string::npos) << env.out;
  EXPECT_NE(env.out.find("[0] cwd=" + dir + "\n"), std::string::npos) << env.out;

  CmdResult args = CtlIn(dir, {"OLDPWD=/tmp/caf\xE9"},
                         {"submit", "--devices", "1", "--", kChild, "argv", "caf\xE9", "x\xFFy",
                          "\xC0\xAF", "\xED\xA0\x80"});
  ASSERT_EQ(args.exit_code, 0) << args.err;
  EXPECT_EQ(args.out, "[0] caf\xE9\n[0] x\xFFy\n[0] \xC0\xAF\n[0] \xED\xA0\x80\n");

  CmdResult ps = d_.Ctl({"ps", "-a"});
  EXPECT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_NE(ps.out.find("SUCCEEDED"), std::string::npos) << ps.out;
  EXPECT_TRUE(IsValidUtf8(ps.out));

  CmdResult show = d_.Ctl({"show", "2"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("argv caf\\xE9 x\\xFFy \\xC0\\xAF \\xED\\xA0\\x80"), std::string::npos)
      << show.out;

  nlohmann::json job = Json(d_.Ctl({"show", "--json", "2"}));
  EXPECT_EQ(job["argv"], nlohmann::json({kChild, "argv", "caf\\xE9", "x\\xFFy", "\\xC0\\xAF",
                                         "\\xED\\xA0\\x80"}));
  EXPECT_EQ(job["cwd"], DisplayEscape(dir));
  EXPECT_EQ(job["argv_truncated"], false);
  nlohmann::json first = Json(d_.Ctl({"show", "--json", "1"}));
  EXPECT_EQ(first["argv"][3], "x\\xFFy");

  CmdResult logs = d_.Ctl({"logs", "2", "--rank", "0"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "caf\xE9\nx\xFFy\n\xC0\xAF\n\xED\xA0\x80\n");
}

TEST_F(BytesE2E, AnErrorTextThatIsNoUtf8NeitherHarmsLtdNorIsLost) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kChild, "--rank", "1",
                        "line:error caf\351,exit:1", "hang"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("rank 1 exited with code 1: caf\\xE9"), std::string::npos) << r.err;
  ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died";
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["state"], "FAILED") << job.dump();
  EXPECT_EQ(job["root_cause"]["message"], "caf\\xE9") << job.dump();
  EXPECT_EQ(job["ranks"][1]["error"], "caf\\xE9") << job.dump();
  CmdResult show = d_.Ctl({"show", "1"});
  EXPECT_NE(show.out.find("caf\\xE9"), std::string::npos) << show.out;

  // The record keeps the byte itself, and the next ltd reads it back.
  d_.Stop();
  std::ifstream in(d_.state_dir() + "/jobs/1/job.json");
  const auto record = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(BytesFromJson(record["root_cause"]["message"]), "caf\xE9") << record.dump();
  ASSERT_TRUE(d_.Start());
  nlohmann::json again = d_.Show("1");
  EXPECT_EQ(again["root_cause"], job["root_cause"]);
  EXPECT_EQ(again["ranks"], job["ranks"]);
  EXPECT_EQ(again["argv"], job["argv"]);
}

// Six running jobs of 700 KB of command line each: more than one gRPC
// message (4 MB) if the commands went out whole.
// A finished job's summary in memory cuts what each attempt and rank said
// (a job of many restarts would hold a cause each); `show` reads its
// record and shows every word.
TEST_F(BytesE2E, WhatEachAttemptSaidIsShownWholeThoughItsSummaryIsCut) {
  const std::string said(1000, 'w');
  const std::string id = SubmitDetached(
      {"--devices", "1", "--max-restarts", "1", "--", kChild, "line:error " + said + ",exit:3"});
  nlohmann::json ended = d_.WaitEnded(id, 60s);
  ASSERT_EQ(ended.value("state", ""), "FAILED") << ended.dump();
  nlohmann::json job = d_.Show(id);
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump();
  for (const auto& attempt : job["attempts"]) {
    EXPECT_EQ(attempt["root_cause"]["message"], said) << attempt.dump();
  }
  EXPECT_EQ(job["root_cause"]["message"], said);
}

TEST_F(BytesE2E, JobsWithHugeCommandsBreakNobodysPs) {
  constexpr size_t kJobs = 6;
  std::vector<std::string> args = {"submit", "-d", "--devices", "1", "--", kChild};
  for (int i = 0; i < 7000; ++i) {
    args.push_back(std::string(99, static_cast<char>('a' + i % 26)) + "\xE9");
  }
  args.push_back("hang");
  std::vector<std::string> ids;
  for (size_t i = 0; i < kJobs; ++i) {
    CmdResult submit = d_.Ctl(args);
    ASSERT_EQ(submit.exit_code, 0) << submit.err;
    ids.push_back(submit.out.substr(0, submit.out.find('\n')));
  }
  for (const std::string& id : ids) {
    ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 20s));
  }

  nlohmann::json job = d_.Show(ids[0]);
  EXPECT_EQ(job["argv_truncated"], true);
  EXPECT_EQ(job["argv"][1], std::string(99, 'a') + "\\xE9");
  EXPECT_TRUE(job["argv"].back().get<std::string>().starts_with("… [+")) << job["argv"].back();

  // `owner`: the jobs are the caller's; another user's show the program
  // alone (their arguments are hidden), so nothing is left to truncate.
  auto check_ps = [&](const std::function<CmdResult(std::vector<std::string>)>& ctl, bool owner) {
    CmdResult ps = ctl({"ps"});
    EXPECT_EQ(ps.exit_code, 0) << ps.err;
    EXPECT_NE(ps.out.find("RUNNING"), std::string::npos) << ps.out.substr(0, 2000);
    EXPECT_LT(ps.out.size(), 4096u);
    for (const auto& argv :
         std::vector<std::vector<std::string>>{{"ps", "--json"}, {"ps", "-a", "--json"}}) {
      nlohmann::json jobs = Json(ctl(argv));
      ASSERT_TRUE(jobs.is_array());
      ASSERT_EQ(jobs.size(), kJobs);
      for (const auto& j : jobs) {
        if (!owner) {
          EXPECT_EQ(j["argv"].size(), 1u) << j["argv"];
          continue;
        }
        EXPECT_EQ(j["argv_truncated"], true);
        size_t text = 0;
        for (size_t i = 0; i + 1 < j["argv"].size(); ++i) text += j["argv"][i].size();
        EXPECT_LE(text, 256u);
      }
    }
  };
  check_ps([&](std::vector<std::string> a) { return d_.Ctl(std::move(a)); }, true);
  if (geteuid() == 0 && std::filesystem::exists("/usr/bin/setpriv")) {
    chmod(d_.dir().c_str(), 0755);  // let nobody reach the socket
    check_ps(
        [&](std::vector<std::string> a) {
          std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                           "--clear-groups",   LtctlPath(),     "--socket",
                                           d_.socket()};
          argv.insert(argv.end(), a.begin(), a.end());
          return RunCommand(argv, {d_.marker()}, 30s);
        },
        false);
  }
  for (const std::string& id : ids) EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (const std::string& id : ids) EXPECT_EQ(d_.WaitEnded(id)["state"], "CANCELLED");
}

// A waiting job's command line past 4 KiB waits in its record, not in
// ltd's memory: `show` reads it from there (up to show's 64 KiB), and
// still says why the job waits.
TEST_F(BytesE2E, AWaitingJobsCommandIsShownFromItsRecord) {
  CmdResult first = d_.Ctl({"submit", "-d", "--devices", "1", "--", kChild, "hang"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string running = first.out.substr(0, first.out.find('\n'));
  std::vector<std::string> args = {"submit",    "-d", "--after", running,
                                   "--devices", "1",  "--",      kChild};
  for (int i = 0; i < 2000; ++i) args.push_back(std::string(99, static_cast<char>('a' + i % 26)));
  args.push_back("exit:0");
  CmdResult submit = d_.Ctl(args);
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = submit.out.substr(0, submit.out.find('\n'));
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job.value("state", ""), "PENDING") << job.dump().substr(0, 2000);
  EXPECT_EQ(job.value("pending_reason", ""), "after job " + running);
  size_t text = 0;
  for (const auto& arg : job["argv"]) text += arg.get<std::string>().size();
  EXPECT_GT(text, 60'000u) << "show gave the 4 KiB kept in memory, not the record's";
  EXPECT_EQ(job["argv"][1], std::string(99, 'a'));
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  EXPECT_EQ(d_.Ctl({"kill", running}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(running)["state"], "CANCELLED");
}

// Records written in ltd's own format into a stopped ltd's state dir:
// thousands of finished jobs of 1.5 KB of command each, more than one gRPC
// message (4 MB) could carry. (Not more: this machine's disk takes about
// 5 ms to delete a job's directory.)
TEST_F(BytesE2E, PsListsThousandsOfRecordsOfAnySize) {
  constexpr int kJobs = 4000;
  d_.Stop();
  for (int i = 1; i <= kJobs; ++i) {
    Job job;
    job.id = std::to_string(i);
    job.state = JobState::kSucceeded;
    job.exit_code = 0;
    job.user = "root";
    job.spec.devices = 1;
    job.spec.argv = {"/bin/prog", std::string(1500, 'x') + "\xE9", "--step=" + job.id};
    job.spec.cwd = "/tmp";
    job.submitted_at = std::chrono::system_clock::now();
    const std::string dir = d_.state_dir() + "/jobs/" + job.id;
    ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
    std::ofstream(dir + "/job.json") << ToJson(job).dump(2);
  }
  ASSERT_TRUE(d_.Start()) << d_.log();

  nlohmann::json jobs = Json(d_.Ctl({"ps", "-a", "--json"}, 120s));
  ASSERT_TRUE(jobs.is_array());
  ASSERT_EQ(jobs.size(), static_cast<size_t>(kJobs));
  std::set<std::string> ids;
  for (const auto& j : jobs) {
    ids.insert(j["id"].get<std::string>());
    EXPECT_EQ(j["argv_truncated"], true);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kJobs));

  CmdResult table = d_.Ctl({"ps", "-a"}, 120s);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), kJobs + 1);
  // The whole command is still there for `show`.
  nlohmann::json one = d_.Show("77");
  EXPECT_EQ(one["argv"][2], "--step=77");
  EXPECT_EQ(one["argv_truncated"], false);
}

// What a client other than ltctl might send: every bytes field invalid
// UTF-8, NUL bytes, absurd numbers. Each gets one line saying what was
// wrong, and ltd carries on.
TEST_F(BytesE2E, RawClientSendingGarbageGetsOneLineErrors) {
  auto api = v1::Ltd::NewStub(
      grpc::CreateChannel("unix:" + d_.socket(), grpc::InsecureChannelCredentials()));
  auto deadline = [] { return std::chrono::system_clock::now() + 30s; };
  auto submit = [&](const v1::SubmitRequest& req, std::string* id = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    auto reader = api->Submit(&ctx, req);
    v1::JobEvent ev;
    while (reader->Read(&ev)) {
      if (id != nullptr && ev.has_accepted()) *id = ev.accepted();
    }
    return reader->Finish();
  };
  auto expect_error = [&](const grpc::Status& s, const std::string& needle) {
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.error_message().find(needle), std::string::npos)
        << "wanted: " << needle << "\ngot: " << s.error_message();
    EXPECT_TRUE(IsValidUtf8(s.error_message())) << s.error_message();
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << s.error_message();
  };
  const std::string dir = d_.dir() + "/d\xE9";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  auto good = [&] {
    v1::SubmitRequest req;
    req.set_devices(1);
    req.add_argv(kChild);
    req.add_argv("--rank");
    req.add_argv("9");
    req.add_argv("\xFF\xFE");
    req.add_argv("exit:0");
    req.set_cwd(dir);
    req.add_env("PATH=/usr/bin:/bin");
    req.add_env(d_.marker());
    req.add_env("LT_RAW=\xC0\xAF");
    req.add_extra_env("LT_RAW2=\xED\xA0\x80");
    req.set_grace_ms(1000);
    req.set_detach(true);
    return req;
  };

  // Invalid UTF-8 everywhere is fine: it is what POSIX allows.
  std::string id;
  ASSERT_TRUE(submit(good(), &id).ok());
  EXPECT_EQ(id, "1");
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");

  const std::string nul = "a\0b"s;
  struct Case {
    std::function<void(v1::SubmitRequest&)> spoil;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {[&](auto& r) { r.set_argv(3, nul); },
            "argv[3] contains a NUL byte; POSIX arguments cannot"},
           {[&](auto& r) { r.set_cwd(dir + nul); }, "the working directory contains a NUL byte"},
           {[&](auto& r) { r.add_env(nul); }, "contains a NUL byte; environment strings cannot"},
           {[&](auto& r) { r.add_extra_env("\xFF"); }, "--env takes KEY=VALUE, got '\\xFF'"},
           {[&](auto& r) { r.set_name("caf\xE9"); }, "--name 'caf\\xE9' may only use"},
           {[&](auto& r) { r.set_name("\n\x1b[2J"); }, "--name '\\n\\x1B[2J' may only use"},
           {[&](auto& r) { r.set_devices(INT32_MAX); }, "is more than the 8 this ltd has"},
           {[&](auto& r) { r.set_devices(-5); }, "--devices must be at least 1"},
           {[&](auto& r) { r.set_grace_ms(INT64_MAX); },
            "--grace 9223372036854775807ms is more than 24h"},
           {[&](auto& r) { r.set_heartbeat_timeout_ms(-1); },
            "--heartbeat-timeout must not be negative"},
           {[&](auto& r) { r.set_max_restarts(-1); }, "--max-restarts -1 is outside 0..100"},
           {[&](auto& r) { r.set_max_restarts(INT32_MAX); },
            "--max-restarts 2147483647 is outside 0..100"},
           {[&](auto& r) { r.clear_argv(); }, "no program given"},
           {[&](auto& r) { r.add_argv(std::string(200'000, 'x')); }, "bytes; Linux passes at most"},
           {[&](auto& r) { r.set_cwd("relative\xE9"); },
            "the working directory must be an absolute path"},
       }) {
    v1::SubmitRequest req = good();
    c.spoil(req);
    expect_error(submit(req), c.error);
  }

  auto show = [&](const std::string& ref) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    v1::JobRef req;
    req.set_job(ref);
    v1::Job reply;
    return api->Show(&ctx, req, &reply);
  };
  expect_error(show("\xFF\xFE"), "no job '\\xFF\\xFE'");
  expect_error(show("1"s + '\0'), "JOB contains a NUL byte");
  expect_error(show(std::string(1 << 20, 'j')), "JOB is 1048576 bytes");
  expect_error(show(""), "no job given");

  auto logs = [&](const std::string& ref, int rank, int64_t tail) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    v1::LogsRequest req;
    req.set_job(ref);
    req.set_rank(rank);
    req.set_tail(tail);
    auto reader = api->Logs(&ctx, req);
    v1::JobEvent ev;
    while (reader->Read(&ev)) {
    }
    return reader->Finish();
  };
  expect_error(logs("\xC0", -1, 0), "no job '\\xC0'");
  expect_error(logs("1", -1, -5), "--tail must be >= 0");
  expect_error(logs("1", 1000, 0), "--rank 1000 is out of range");
  expect_error(logs("1", INT32_MIN, 0), "is out of range");

  auto kill = [&](const std::string& ref, int sig) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    v1::KillRequest req;
    req.set_job(ref);
    req.set_signal(sig);
    v1::KillReply reply;
    return api->Kill(&ctx, req, &reply);
  };
  expect_error(kill("1", 99999), "no signal 99999");
  expect_error(kill("1", -1), "no signal -1");
  expect_error(kill("\xE9", 0), "no job '\\xE9'");

  for (bool attach : {true, false}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    v1::JobRef req;
    req.set_job("\xF0\x9F");
    auto reader = attach ? api->Attach(&ctx, req) : api->Wait(&ctx, req);
    v1::JobEvent ev;
    while (reader->Read(&ev)) {
    }
    expect_error(reader->Finish(), "no job '\\xF0\\x9F'");
  }

  // ltd is alive and well, with one job and its exact bytes.
  ASSERT_TRUE(ProcessAlive(d_.pid()));
  nlohmann::json jobs = Json(d_.Ctl({"ps", "-a", "--json"}));
  ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
  EXPECT_EQ(jobs[0]["argv"][3], "\\xFF\\xFE");
  EXPECT_EQ(jobs[0]["cwd"], DisplayEscape(dir));
}

}  // namespace
}  // namespace ltd::test
