// Security end to end, limits: files that are their owner's alone, a full
// disk, huge and many records, log floods, restarts, the fair queue, fds,
// connections and one ltd per state dir (the fixture: security_fixture.h).
#include "security_fixture.h"

namespace ltd::test {
namespace {

TEST_F(Security, JobFilesAreTheOwnersAlone) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string secret = "A-PRIVATE-OUTPUT-91c2";
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--", "/bin/sh", "-c", "echo " + secret});
  ASSERT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
  auto mode = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777u;
  };
  const std::string state = d_.state_dir(), jobs = state + "/jobs", dir = jobs + "/" + id;
  for (const std::string& p : {state, jobs}) {
    EXPECT_TRUE(mode(p) == 0711 || mode(p) == 0700) << p << " is " << std::oct << mode(p);
  }
  EXPECT_EQ(mode(dir) & 0044, 0u) << dir << " is listable by others: " << std::oct << mode(dir);
  EXPECT_NE(RunCommandAs(b_->As(), {"/bin/ls", dir}, {}, 10s).exit_code, 0) << "B lists A's job";
  for (const std::string f : {"job.json", "log.head"}) {
    EXPECT_EQ(mode(dir + "/" + f) & 0077, 0u) << f << " is " << std::oct << mode(dir + "/" + f);
    CmdResult cat = RunCommandAs(b_->As(), {"/bin/cat", dir + "/" + f}, {}, 10s);
    EXPECT_NE(cat.exit_code, 0) << "B read " << f;
    EXPECT_FALSE(Has(cat.out, secret));
  }
  CmdResult theirs = CtlAs(*b_, {"logs", id});
  ExpectOneLineError(theirs, "owner");
  EXPECT_FALSE(Has(theirs.out, secret));
  CmdResult mine = CtlAs(*a_, {"logs", id});
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_TRUE(Has(mine.out, secret)) << mine.out;

  // The rank may still write its TORCHELASTIC_ERROR_FILE...
  CmdResult err = CtlAs(*a_, {"submit", "--devices", "1", "--", "/bin/sh", "-c",
                              "printf '{\"message\": \"boom from A\"}' > "
                              "\"$TORCHELASTIC_ERROR_FILE\"; exit 3"});
  EXPECT_EQ(err.exit_code, 3) << err.err;
  EXPECT_EQ(d_.Show("2")["root_cause"]["message"], "boom from A");
  // ...but a link there to a file A may not read is not read for A.
  const std::string root_secret = PrivateDir() + "/secret.json";
  WriteFile(root_secret, "{\"message\": \"ROOT-ONLY-SECRET\"}", 0600);
  for (const std::string& target : {root_secret, std::string("/etc/shadow")}) {
    CmdResult link = CtlAs(*a_, {"--json", "submit", "--devices", "1", "--", "/bin/sh", "-c",
                                 "ln -s " + target + " \"$TORCHELASTIC_ERROR_FILE\"; exit 3"});
    EXPECT_EQ(link.exit_code, 3) << link.err;
    EXPECT_FALSE(Has(link.err, "ROOT-ONLY-SECRET") || Has(link.err, "root:")) << link.err;
  }
  for (const std::string job : {"3", "4"}) {
    const std::string message = d_.Show(job)["root_cause"].value("message", "");
    EXPECT_FALSE(Has(message, "ROOT-ONLY-SECRET") || Has(message, "root:")) << message;
  }
}

// ---- 6. ids after a full disk ----

TEST_F(Security, AFullDiskNeverHandsAnIdOrItsLogsToASecondJob) {
  const std::string state = d_.state_dir();
  mkdir(state.c_str(), 0711);
  if (mount("tmpfs", state.c_str(), "tmpfs", 0, "size=256k,nr_inodes=128,mode=0711") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  mounts_.push_back(state);
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string old_output = "A-OLD-OUTPUT-55e1";
  const std::string first =
      SubmitAs(*a_, {"--devices", "1", "--", "/bin/sh", "-c", "echo " + old_output});
  ASSERT_EQ(d_.WaitEnded(first)["state"], "SUCCEEDED");

  // Fill the disk.
  const std::string filler = state + "/filler";
  {
    const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    const std::string page(4096, 'f');
    while (write(fd, page.data(), page.size()) > 0) {
    }
    close(fd);
  }
  std::set<long> ids = {std::stol(first)};
  CmdResult refused =
      CtlAs(*a_, {"submit", "-d", "--devices", "1", "--", "/bin/sh", "-c", "echo " + old_output});
  ExpectOneLineError(refused, "cannot record the job");
  // Free a page at a time: every submit is either refused with a line, or
  // accepted with its record on disk.
  int accepted = 0;
  for (off_t size = static_cast<off_t>(fs::file_size(filler)); size > 0 && accepted < 3;
       size -= 4096) {
    ASSERT_EQ(truncate(filler.c_str(), size - 4096), 0);
    CmdResult r =
        CtlAs(*a_, {"submit", "-d", "--devices", "1", "--", "/bin/sh", "-c", "echo " + old_output});
    if (r.exit_code == 0) {
      const std::string id = TrimEnd(r.out);
      ids.insert(std::stol(id));
      ++accepted;
      nlohmann::json job = d_.WaitEnded(id);
      EXPECT_TRUE(job.contains("state")) << "job " << id << " was accepted without a record";
    } else {
      ExpectOneLineError(r, "cannot record the job");
    }
    ASSERT_TRUE(ProcessAlive(d_.pid()));
  }
  std::fprintf(stderr, "full disk: %d submit(s) accepted as space came back\n", accepted);
  for (const auto& j : AllJobs()) ids.insert(std::stol(j.value("id", "0")));
  unlink(filler.c_str());

  // B's next job is a new id, and its logs are B's alone; after a restart too.
  const std::string new_output = "B-NEW-OUTPUT-0d4b";
  for (int round = 0; round < 2; ++round) {
    const std::string id =
        SubmitAs(*b_, {"--devices", "1", "--", "/bin/sh", "-c", "echo " + new_output});
    ASSERT_FALSE(id.empty());
    EXPECT_GT(std::stol(id), *ids.rbegin()) << "job id " << id << " was used before";
    ids.insert(std::stol(id));
    EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
    CmdResult logs = CtlAs(*b_, {"logs", id});
    EXPECT_EQ(logs.exit_code, 0) << logs.err;
    EXPECT_TRUE(Has(logs.out, new_output)) << logs.out;
    EXPECT_FALSE(Has(logs.out, old_output)) << "B sees A's old output:\n" << logs.out;
    if (round == 0) {
      EXPECT_EQ(d_.Stop(), 0);
      ASSERT_TRUE(StartLtd()) << d_.log();
    }
  }
}

// ---- 7. a huge argv ----

TEST_F(Security, HugeArgvsLeavePsWorking) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  // Eight running jobs of ~700 KB of arguments each: 5.6 MB of argv,
  // more than a 4 MB gRPC message.
  std::vector<std::string> args = {"--devices", "1", "--", child_};
  for (int i = 0; i < 7000; ++i) args.push_back(std::string(99, 'a' + i % 26));
  args.push_back("hang");
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(SubmitAs(*a_, args));
  for (const std::string& id : ids) ASSERT_TRUE(WaitState(id, "RUNNING")) << id;

  for (const std::vector<std::string>& ps :
       std::vector<std::vector<std::string>>{{"ps"}, {"ps", "-a"}}) {
    CmdResult r = CtlAs(*b_, ps, 60s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Lines(r.out), 9u) << Tail(r.out, 2000);
    std::istringstream lines(r.out);
    std::string header;
    std::getline(lines, header);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LT(line.size(), 400u) << "the command is not truncated";
      EXPECT_TRUE(Has(line, "...") || Has(line, "\u2026")) << "no truncation mark: " << line;
    }
  }
  CmdResult json = CtlAs(*b_, {"--json", "ps"}, 60s);
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(Json(json.out).size(), 8u);
  EXPECT_LT(json.out.size(), 1u << 20) << "ps --json carries every argv in full";
  CmdResult show = CtlAs(*b_, {"show", ids[0]}, 60s);
  EXPECT_EQ(show.exit_code, 0) << show.err;
  for (const std::string& id : ids) CtlAs(*a_, {"kill", id});
  for (const std::string& id : ids) d_.WaitEnded(id);
}

// ---- 8. many records ----

TEST_F(Security, ThousandsOfRecordsLeavePsWorking) {
  // Written straight into the state dir of an ltd not yet started, in the
  // record format (daemon/job.cc): 5,000 records of ~1.3 KB, 6.5 MB of JSON.
  constexpr int kRecords = 5000;
  const std::string jobs = d_.state_dir() + "/jobs";
  fs::create_directories(jobs);
  for (const std::string& dir : {d_.state_dir(), jobs}) chmod(dir.c_str(), 0711);
  for (int i = 1; i <= kRecords; ++i) {
    const std::string id = std::to_string(i);
    nlohmann::json rec = {
        {"id", id},
        {"name", ""},
        {"user", a_->name()},
        {"uid", a_->uid()},
        {"gid", a_->gid()},
        {"state", "SUCCEEDED"},
        {"exit_code", 0},
        {"devices", 1},
        {"device_slots", nlohmann::json::array({0})},
        {"containment", "cgroup"},
        {"submitted_at", "2024-01-01T00:00:00.000000Z"},
        {"started_at", "2024-01-01T00:00:01.000000Z"},
        {"ended_at", "2024-01-01T00:00:02.000000Z"},
        {"root_cause", nullptr},
        {"ranks",
         nlohmann::json::array({{{"rank", 0}, {"pid", 0}, {"state", "EXITED"}, {"exit_code", 0}}})},
        {"attempts", nlohmann::json::array()},
        {"argv", nlohmann::json::array({child_, std::string(1000, 'x'), "exit:0"})},
        {"cwd", "/"},
    };
    const std::string dir = jobs + "/" + id;
    mkdir(dir.c_str(), 0711);
    WriteFile(dir + "/job.json", rec.dump(2) + "\n", 0600);
  }
  WriteFile(d_.state_dir() + "/next-id", std::to_string(kRecords + 1) + "\n", 0600);
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult ps = CtlAs(*b_, {"ps", "-a"}, 120s);
  EXPECT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_EQ(Lines(ps.out), static_cast<size_t>(kRecords) + 1);  // and a header
  CmdResult json = CtlAs(*b_, {"--json", "ps", "-a"}, 120s);
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(Json(json.out).size(), static_cast<size_t>(kRecords));
}

// ---- 9. a log flood ----

TEST_F(Security, ALogFloodIsCutToTheLimitKeepingHeadAndTail) {
  ASSERT_TRUE(StartLtd({"--job-max-log-bytes", "1M"})) << d_.log();
  // 20 MB of output, then a last line.
  const std::string id = SubmitAs(
      *a_, {"--devices", "1", "--", "/bin/sh", "-c",
            "echo FIRST-LINE; yes flood-line-0123456789 | head -c 20000000; echo; echo LAST-LINE"});
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(d_.WaitEnded(id, 120s)["state"], "SUCCEEDED");
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(d_.state_dir() + "/jobs/" + id)) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  EXPECT_LE(bytes, (1u << 20) + (128u << 10)) << "the job's files take " << bytes << " bytes";
  CmdResult logs = CtlAs(*a_, {"logs", id}, 60s);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  const size_t first = logs.out.find("FIRST-LINE"), cut = logs.out.find("cut"),
               last = logs.out.find("LAST-LINE");
  EXPECT_NE(first, std::string::npos) << "the head is gone";
  EXPECT_NE(cut, std::string::npos) << "no mark where bytes were cut";
  EXPECT_NE(last, std::string::npos) << "the tail is gone";
  if (first != std::string::npos && cut != std::string::npos && last != std::string::npos) {
    EXPECT_LT(first, cut);
    EXPECT_LT(cut, last);
  }
}

// ---- 10. a restart storm ----

TEST_F(Security, RestartsAreCappedAndBackedOff) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult huge = CtlAs(*a_, {"submit", "-d", "--devices", "1", "--max-restarts", "2147483647",
                               "--", child_, "exit:1"});
  ExpectOneLineError(huge, "100");  // the default --max-restarts-limit
  EXPECT_TRUE(AllJobs().empty()) << "a job was made";
  if (huge.exit_code == 0) CtlAs(*a_, {"kill", TrimEnd(huge.out)});  // it would restart for ever

  const auto start = std::chrono::steady_clock::now();
  const std::string id =
      SubmitAs(*a_, {"--devices", "1", "--max-restarts", "50", "--", child_, "exit:1"});
  ASSERT_FALSE(id.empty());
  // A bound on work, not on speed: it fails only if ltd restarts too often.
  WaitFor([&] { return std::chrono::steady_clock::now() - start >= 3s; }, 10s);
  const size_t attempts = d_.Show(id).value("attempts", nlohmann::json::array()).size();
  EXPECT_LE(attempts, 4u) << "no more than 4 attempts within 3 s (backoff 1s, doubling)";
  CtlAs(*a_, {"kill", id});
  d_.WaitEnded(id);
}

// ---- 11. a fair queue ----

TEST_F(Security, AnotherUsersJobStartsBeforeABacklogDrains) {
  // 300 pending jobs of A (2,000 would show the same, and take minutes on
  // a 2-core machine); the limit is raised so that they are all taken.
  ASSERT_TRUE(StartLtd({"--devices", "2", "--user-max-pending-jobs", "1000"})) << d_.log();
  const std::string go = bin_.path() + "/go";
  const std::string blocker =
      SubmitAs(*a_, {"--devices", "2", "--", child_, "waitfile:" + go + ",exit:0"});
  ASSERT_TRUE(WaitState(blocker, "RUNNING"));
  constexpr int kBacklog = 300;
  for (int i = 0; i < kBacklog; ++i) {
    ASSERT_FALSE(SubmitAs(*a_, {"--devices", "2", "--", child_, "sleep:50,exit:0"}).empty()) << i;
  }
  const std::string theirs = SubmitAs(*b_, {"--devices", "2", "--", child_, "exit:0"});
  WriteFile(go, "", 0644);
  int a_pending = -1;
  std::string b_state;
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json all = AllJobs();
        a_pending = 0;
        for (const auto& j : all) {
          if (j.value("id", "") == theirs) b_state = j.value("state", "");
          if (j.value("user", "") == a_->name() && j.value("state", "") == "PENDING") ++a_pending;
        }
        return b_state != "PENDING" && !b_state.empty();
      },
      240s));
  EXPECT_GE(a_pending, 250) << "B's job started (" << b_state << ") only once A's backlog was down "
                            << "to " << a_pending << " pending jobs";
}

TEST_F(Security, PendingJobsPerUserAreLimited) {
  ASSERT_TRUE(StartLtd({"--devices", "2", "--user-max-pending-jobs", "100"})) << d_.log();
  const std::string go = bin_.path() + "/go";
  const std::string blocker =
      SubmitAs(*a_, {"--devices", "2", "--", child_, "waitfile:" + go + ",exit:0"});
  ASSERT_TRUE(WaitState(blocker, "RUNNING"));
  for (int i = 0; i < 100; ++i) {
    ASSERT_FALSE(SubmitAs(*a_, {"--devices", "2", "--", child_, "exit:0"}).empty()) << i;
  }
  CmdResult over = CtlAs(*a_, {"submit", "-d", "--devices", "2", "--", child_, "exit:0"});
  ExpectOneLineError(over, "100");
  // The limit is A's: B still submits.
  EXPECT_FALSE(SubmitAs(*b_, {"--devices", "2", "--", child_, "exit:0"}).empty());
  WriteFile(go, "", 0644);
}

// ---- 12. fd exhaustion ----

TEST_F(Security, RunningOutOfFdsNeitherSpinsNorFloodsTheLog) {
  d_.set_nofile_limit(64);
  ASSERT_TRUE(StartLtd()) << d_.log();
  ConnectionHolder conns(d_.socket(), 200, nullptr);
  ASSERT_TRUE(WaitFor([&] { return conns.connected() > 64; }, 10s)) << conns.connected();
  // ltd takes what its 64 fds allow; the rest wait in the backlog.
  WaitFor([&] { return CountOpenFds(d_.pid()) >= 60; }, 5s);
  const double cpu0 = CpuSeconds(d_.pid());
  const size_t log0 = Lines(d_.log());
  const auto until = std::chrono::steady_clock::now() + 3s;
  WaitFor([&] { return std::chrono::steady_clock::now() >= until || !ProcessAlive(d_.pid()); },
          10s);
  ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died";
  const double cpu = CpuSeconds(d_.pid()) - cpu0;
  const size_t logged = Lines(d_.log()) - log0;
  EXPECT_LT(cpu, 0.5) << "ltd spun: " << cpu << " s of CPU in 3 s without fds";
  EXPECT_LE(logged, 5u) << "ltd logged " << logged << " lines in 3 s without fds:\n"
                        << Tail(d_.log(), 2000);
  conns.Release();
  EXPECT_TRUE(WaitFor([&] { return d_.Ctl({"ps"}, 5s).exit_code == 0; }, 30s))
      << "ltd does not answer once the connections are gone";
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--", child_, "exit:0"});
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

// ---- 13. connections per user ----

TEST_F(Security, ConnectionsPerUserAreLimited) {
  ASSERT_TRUE(StartLtd({"--user-max-connections", "8"})) << d_.log();
  const RunAs as_a = a_->As();
  ConnectionHolder conns(d_.socket(), 50, &as_a);
  ASSERT_TRUE(WaitFor([&] { return conns.connected() == 50; }, 10s)) << conns.connected();
  CmdResult ps = CtlAs(*b_, {"ps"}, 20s);
  EXPECT_EQ(ps.exit_code, 0) << "B is locked out by A's connections: " << ps.err;
  EXPECT_TRUE(WaitFor([&] { return conns.closed() >= 42; }, 15s))
      << "ltd closed " << conns.closed() << " of A's 50 connections; wanted at least 42";
  EXPECT_LE(conns.closed(), 50);
  conns.Release();
}

// ---- 14. a second ltd ----

TEST_F(Security, ASecondLtdOnTheSameStateDirRefusesToStart) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--", child_, "hang"});
  ASSERT_TRUE(WaitState(id, "RUNNING"));
  const pid_t rank = d_.Show(id)["ranks"][0]["pid"];
  unlink(d_.socket().c_str());
  CmdResult second = RunCommand({LtdPath(), "--socket", d_.dir() + "/second.sock", "--state-dir",
                                 d_.state_dir(), "--devices", "2"},
                                {}, 30s);
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_TRUE(Has(second.err, "another ltd (pid " + std::to_string(d_.pid()) +
                                  ") is using state dir " + d_.state_dir()))
      << second.err;
  EXPECT_EQ(Lines(second.err), 1u) << second.err;
  EXPECT_TRUE(ProcessAlive(rank)) << "A's rank was touched";
  EXPECT_TRUE(ProcessAlive(d_.pid()));
  EXPECT_TRUE(fs::exists(d_.state_dir() + "/jobs/" + id + "/job.json"));
}

// ---- 15. names between users ----

}  // namespace
}  // namespace ltd::test
