// Security end to end (issue 7): two throwaway local users attack a real
// ltd through the real ltctl (and, where ltctl would refuse to send it,
// a raw gRPC client). Needs root: skipped otherwise.
//
// ---- Threat model (for the README) ----
//
// ltd runs as root on a shared server. Root is trusted; every other local
// user is not: each may run any program, send ltd any bytes on its socket
// (ltctl or not), put anything in a job's program, arguments, environment,
// working directory, name and output, and race or fill what they can
// write. ltd promises, against any such user:
//
// - Nothing a user sends runs or is read with more privilege than the
//   user's own. A job runs as its submitter with that user's groups; the
//   program is found and the working directory entered as that user, so a
//   job learns nothing the user could not learn from a shell (not even
//   whether a file exists in a directory the user cannot read). Loader
//   variables (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, GCONV_PATH, ...)
//   reach only the user's own processes.
// - A job's files (record, logs) are its owner's and root's: other users
//   may see that it exists (`ps`, `show`, without its environment) but not
//   read its output, files or error file. What ltd reads back from a place
//   the user can write (TORCHELASTIC_ERROR_FILE) is opened as the user's
//   and never follows a link to someone else's file.
// - A job id names one job for ever: a full disk or a restart never hands
//   a second job the id, and with it the logs, of an earlier one. A job
//   that cannot be recorded is refused, never run unrecorded.
// - Bytes are bytes: non-UTF-8 in argv, environment, working directory,
//   name, output or heartbeat lines never crashes ltd or breaks `ps`,
//   `show` or `logs`; it is shown escaped where text is needed.
// - No user can take the server from the others: per-user limits on
//   pending jobs and connections, a per-job cap on log bytes, a cap on
//   --max-restarts with backoff between restarts, a fair queue across
//   users, input validated at the RPC edge, and an ltd that neither spins
//   nor floods its log when it runs out of file descriptors. Huge jobs or
//   many records never make `ps` fail.
// - One state dir has one ltd.
//
// Not promised: protection from root, from the kernel, or from a user's
// own jobs (a user's ranks may do anything that user may do).
//
// Each test makes its own two users (lts<pid>a, lts<pid>b) and a group
// (lts<pid>g, A's supplementary group), a 0755 temp dir with the binaries
// the users run, and its own ltd; teardown proves nothing is left (no
#include <algorithm>
#include <filesystem>
#include <sstream>

#include "security_fixture.h"

namespace ltd::test {
namespace {

TEST_F(Security, LoaderVariablesReachOnlyTheUsersOwnProcesses) {
  if (access("/usr/bin/cc", X_OK) != 0) GTEST_SKIP() << "no C compiler (cc) to build evil.so";
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string out = bin_.path() + "/loaded-by";
  WriteFile(out, "", 0666);
  std::string error;
  const std::string lib = BuildEvilLibrary(bin_.path(), out, &error);
  ASSERT_FALSE(lib.empty()) << error;
  // The same library under a plain name, for LD_LIBRARY_PATH to find, and
  // as a gconv module that GCONV_PATH points iconv at.
  fs::copy_file(lib, bin_.path() + "/libltsevil.so");
  chmod((bin_.path() + "/libltsevil.so").c_str(), 0755);
  fs::copy_file(lib, bin_.path() + "/LTSEVIL.so");
  chmod((bin_.path() + "/LTSEVIL.so").c_str(), 0755);
  WriteFile(bin_.path() + "/gconv-modules",
            "module LTSEVIL// INTERNAL LTSEVIL 1\nmodule INTERNAL LTSEVIL// LTSEVIL 1\n", 0644);

  const std::vector<std::vector<std::string>> attacks = {
      {"--env", "LD_PRELOAD=" + lib},
      {"--env", "LD_AUDIT=" + lib},
      {"--env", "LD_LIBRARY_PATH=" + bin_.path(), "--env", "LD_PRELOAD=libltsevil.so"},
      {"--env", "GCONV_PATH=" + bin_.path()},
  };
  for (const auto& attack : attacks) {
    std::vector<std::string> args = {"submit", "--devices", "2"};
    args.insert(args.end(), attack.begin(), attack.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", "echo x | iconv -f LTSEVIL -t UTF-8; true"});
    CmdResult r = CtlAs(*a_, args);
    EXPECT_EQ(r.exit_code, 0) << attack[1] << ": " << r.err;
  }
  // In the client's own environment too, and on a hung native rank whose
  // stack ltd takes (gdb, as root) before the teardown.
  CmdResult hung = CtlAs(
      *a_, {"submit", "--devices", "1", "--heartbeat-timeout", "1s", "--", child_, "beat:1:0,hang"},
      60s, {"LD_PRELOAD=" + lib, "LD_AUDIT=" + lib});
  EXPECT_EQ(hung.exit_code, 124) << hung.err;

  const std::string mine = std::to_string(a_->uid()) + " " + std::to_string(a_->uid());
  std::istringstream lines(ReadWhole(out));
  int loaded = 0;
  for (std::string line; std::getline(lines, line); ++loaded) {
    EXPECT_EQ(line, mine) << "evil.so ran as uid/euid " << line << ", not only as user A (" << mine
                          << ")";
  }
  std::fprintf(stderr, "evil.so was loaded %d times, every time as %s: %s\n", loaded, mine.c_str(),
               HasFailure() ? "no" : "yes");
}

// gdb reads the rank's binary and libraries, which the user controls: it
// runs as the rank's user, never as root: at the hang's verdict and for
// `ltctl stack`. The rank's watcher sees an attach of a few milliseconds
// only when it gets the CPU then, so the held job's stacks are asked for
// again until it has seen one; every tracer it saw must be user A.
TEST_F(Security, StacksOfAUsersRanksAreTakenWithTheUsersPrivilegesOnly) {
  if (access("/usr/bin/gdb", X_OK) != 0 && access("/usr/bin/eu-stack", X_OK) != 0)
    GTEST_SKIP() << "neither eu-stack nor gdb is installed";
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string work = bin_.path() + "/tracer";  // where user A's rank may write
  mkdir(work.c_str(), 0777);
  chmod(work.c_str(), 0777);
  const std::string seen = work + "/uid";
  CmdResult submitted =
      CtlAs(*a_, {"submit", "-d", "--devices", "1", "--heartbeat-timeout", "1s", "--hold-on-hang",
                  "1h", "--", child_, "tracer:" + seen + ",beat:1:0,hang"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = TrimEnd(submitted.out);
  ASSERT_TRUE(WaitFor([&] { return Has(d_.Ctl({"ps"}).out, "HUNG (held "); }, 60s))
      << d_.Ctl({"ps"}).out;
  nlohmann::json job = d_.Show(id);
  const std::string stack = job["hang_report"]["ranks"][0].value("stack", "");
  EXPECT_NE(stack.find("#0"), std::string::npos) << "no native stack was taken: " << job.dump(1);
  EXPECT_TRUE(WaitFor(
      [&] {
        if (TrimEnd(ReadWhole(seen)).empty()) CtlAs(*a_, {"stack", id});
        return !TrimEnd(ReadWhole(seen)).empty();
      },
      60s))
      << "the rank's watcher never saw a tool attached";
  const std::string uid = std::to_string(a_->uid());
  std::istringstream lines(ReadWhole(seen));
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line, uid + " " + uid + " " + uid + " " + uid)
        << "a tool attached with other uids (real, effective, saved, fs) than user A's; job: "
        << job.dump(1) << "\nltd's log:\n"
        << d_.log();
  }
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(id, 30s).value("exit_code", 0), 124);
}

// ---- 2. the working directory ----

TEST_F(Security, WorkingDirectoryIsEnteredAsTheUser) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string secret = "A-SECRET-7f3a";
  WriteFile(a_->home() + "/secret.txt", secret + "\n", 0644);  // only the 0700 home guards it
  chown((a_->home() + "/secret.txt").c_str(), a_->uid(), a_->gid());
  // B's ltctl runs with A's home as its working directory: root entered it
  // before becoming B, so B's getcwd() names it.
  CmdResult r =
      CtlAs(*b_, {"submit", "--devices", "1", "--", "/bin/cat", "secret.txt"}, 30s, {}, a_->home());
  EXPECT_EQ(r.exit_code, 126) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, "working directory")) << r.err;
  EXPECT_FALSE(Has(r.out + r.err, secret)) << "B read A's file";
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["root_cause"]["reason"], "spawn_failed");
  EXPECT_EQ(job["exit_code"], 126);
  EXPECT_TRUE(Has(job["root_cause"].value("message", ""), "working directory")) << job.dump();
  CmdResult logs = CtlAs(*b_, {"logs", "1"});
  EXPECT_FALSE(Has(logs.out + logs.err, secret)) << "B read A's file";
  // A relative program in there is not found on B's behalf either.
  CmdResult rel =
      CtlAs(*b_, {"submit", "--devices", "1", "--", "./secret.txt"}, 30s, {}, a_->home());
  EXPECT_EQ(rel.exit_code, 126) << rel.err;
  EXPECT_FALSE(Has(rel.out + rel.err, secret));
}

// ---- 3. the program is found as the user ----

// `s` with `what` written PROG and job ids written N: what is left must
// not differ between a program that exists and one that does not.
std::string Without(std::string s, const std::string& what) {
  for (size_t at; (at = s.find(what)) != std::string::npos;) s.replace(at, what.size(), "PROG");
  return std::regex_replace(s, std::regex("job [0-9]+"), "job N");
}

TEST_F(Security, ProgramsAreFoundAsTheUserAndTellNothingMore) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string priv = PrivateDir();
  const std::string exists = priv + "/exists";
  const std::string missing = priv + "/missing";
  fs::copy_file(child_, exists);
  chmod(exists.c_str(), 0755);

  // What B's own shell says about each: the same, "Permission denied".
  CmdResult sh_exists = RunCommandAs(b_->As(), {"/bin/sh", "-c", exists}, {}, 10s);
  CmdResult sh_missing = RunCommandAs(b_->As(), {"/bin/sh", "-c", missing}, {}, 10s);
  ASSERT_EQ(sh_exists.exit_code, sh_missing.exit_code);
  EXPECT_EQ(sh_exists.exit_code, 126);

  CmdResult e = CtlAs(*b_, {"submit", "--devices", "1", "--", exists, "exit:0"});
  CmdResult m = CtlAs(*b_, {"submit", "--devices", "1", "--", missing, "exit:0"});
  EXPECT_EQ(e.exit_code, sh_exists.exit_code) << e.err;
  EXPECT_EQ(m.exit_code, sh_missing.exit_code) << m.err;
  EXPECT_TRUE(Has(e.err, "Permission denied")) << e.err;
  EXPECT_EQ(Without(e.err, exists), Without(m.err, missing))
      << "the answers tell B whether a file it cannot see exists";
  nlohmann::json je = d_.Show("1"), jm = d_.Show("2");
  EXPECT_EQ(je["exit_code"], jm["exit_code"]);
  EXPECT_EQ(Without(je["root_cause"].value("message", ""), exists),
            Without(jm["root_cause"].value("message", ""), missing));

  // Found through PATH: no difference either, whatever B's shell says.
  const std::vector<std::string> path = {"PATH=" + priv + ":/usr/bin:/bin"};
  CmdResult pe = CtlAs(*b_, {"submit", "--devices", "1", "--", "exists", "exit:0"}, 30s, path);
  CmdResult pm = CtlAs(*b_, {"submit", "--devices", "1", "--", "missing", "exit:0"}, 30s, path);
  EXPECT_EQ(pe.exit_code, pm.exit_code) << pe.err << pm.err;
  EXPECT_EQ(Without(pe.err, "exists"), Without(pm.err, "missing"));

  // Executable only through a supplementary group of A's: A runs it, B not.
  const std::string gdir = bin_.path() + "/grp";
  mkdir(gdir.c_str(), 0755);
  const std::string prog = gdir + "/grouponly";
  fs::copy_file(child_, prog);
  const group* g = getgrnam(group_.c_str());
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(chown(prog.c_str(), 0, g->gr_gid), 0);
  chmod(prog.c_str(), 0750);
  CmdResult ga = CtlAs(*a_, {"submit", "--devices", "2", "--", prog, "exit:0"});
  EXPECT_EQ(ga.exit_code, 0) << "A could not run a program of its group: " << ga.err;
  CmdResult gb = CtlAs(*b_, {"submit", "--devices", "1", "--", prog, "exit:0"});
  EXPECT_EQ(gb.exit_code, 126) << gb.err;
}

// The ranks, and the files opened for the job, get the groups of the
// process that submitted it, as ranks started from its shell would: not
// its user's login groups (NSS), of which a session may hold fewer (`sg`,
// setgroups) or more (a group PAM granted at login).
TEST_F(Security, RanksAndOutputFilesGetTheSubmittersGroups) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const group* g = getgrnam(group_.c_str());
  ASSERT_NE(g, nullptr);
  const gid_t gg = g->gr_gid;
  const std::string gdir = bin_.path() + "/gout";  // only group_ may write here
  ASSERT_EQ(mkdir(gdir.c_str(), 0700), 0);
  ASSERT_EQ(chown(gdir.c_str(), 0, gg), 0);
  ASSERT_EQ(chmod(gdir.c_str(), 0770), 0);
  const std::vector<std::string> env = {d_.marker(), "HOME=" + a_->home(), "USER=" + a_->name()};
  auto submit = [&](const RunAs& as, const std::string& output) {
    std::vector<std::string> argv = {ltctl_, "--socket", d_.socket(), "submit", "--devices", "2"};
    if (!output.empty()) argv.insert(argv.end(), {"--output", output});
    argv.insert(argv.end(), {"--", child_, "ids"});
    return RunCommandAs(as, argv, env, 30s);
  };
  // Each rank's sorted groups (the kernel keeps them sorted).
  auto ranks_groups = [](const std::string& out) {
    std::vector<std::vector<gid_t>> all;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find("groups=");
      if (at == std::string::npos) continue;
      std::vector<gid_t> groups;
      std::istringstream list(line.substr(at + 7));
      for (std::string g; std::getline(list, g, ',');) {
        if (!g.empty()) groups.push_back(static_cast<gid_t>(std::stoul(g)));
      }
      std::sort(groups.begin(), groups.end());
      all.push_back(groups);
    }
    return all;
  };
  auto sorted = [](std::vector<gid_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };

  const RunAs login = a_->As();
  ASSERT_NE(std::find(login.groups.begin(), login.groups.end(), gg), login.groups.end());
  CmdResult l = submit(login, "");
  EXPECT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(ranks_groups(l.out), (std::vector<std::vector<gid_t>>(2, sorted(login.groups))))
      << l.out;

  RunAs fewer = login;
  fewer.groups = {a_->gid()};
  CmdResult f = submit(fewer, "");
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_groups(f.out), (std::vector<std::vector<gid_t>>(2, {a_->gid()})))
      << "a group the submitter had dropped came back from the login's: " << f.out;

  RunAs more = login;
  more.groups.push_back(54321);  // no such group: a number the session holds all the same
  CmdResult m = submit(more, "");
  EXPECT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(ranks_groups(m.out), (std::vector<std::vector<gid_t>>(2, sorted(more.groups))))
      << m.out;

  // --output in a directory only group_ may write to: with the group, the
  // job writes there; without it, the submit is refused and nothing made.
  CmdResult wf = submit(fewer, gdir + "/fewer-%j.out");
  EXPECT_NE(wf.exit_code, 0) << wf.out;
  EXPECT_TRUE(Has(wf.err, gdir)) << wf.err;
  CmdResult wl = submit(login, gdir + "/login.out");
  EXPECT_EQ(wl.exit_code, 0) << wl.err;
  EXPECT_EQ(ranks_groups(ReadWhole(gdir + "/login.out")).size(), 2u)
      << ReadWhole(gdir + "/login.out");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(gdir)) ++files;
  EXPECT_EQ(files, 1u) << "only login.out";
}

// A job an earlier release queued has no groups in its record: its ranks
// get the user's login groups, looked up by the supervisor that can (the
// static lt-shim runs no NSS, so ltd starts lt-shim-etcd for it).
TEST_F(Security, AQueuedRecordWithoutGroupsGetsTheLoginGroups) {
  ASSERT_TRUE(StartLtd({"--devices", "1"})) << d_.log();
  const group* g = getgrnam(group_.c_str());
  ASSERT_NE(g, nullptr);
  const std::string holder = SubmitAs(*a_, {"--devices", "1", "--", "/bin/sleep", "3600"});
  ASSERT_TRUE(WaitState(holder, "RUNNING")) << d_.Show(holder).dump();
  RunAs fewer = a_->As();
  fewer.groups = {a_->gid()};  // the record would say just this
  CmdResult q = RunCommandAs(
      fewer,
      {ltctl_, "--socket", d_.socket(), "submit", "-d", "--devices", "1", "--", child_, "ids"},
      {d_.marker(), "HOME=" + a_->home()}, 30s);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const std::string queued = TrimEnd(q.out);
  ASSERT_EQ(d_.Show(queued).value("state", ""), "PENDING");
  d_.KillHard();  // a stop would end the jobs (the tests' ltd has --restore-window 0)

  const std::string path = d_.state_dir() + "/jobs/" + queued + "/job.json";
  nlohmann::json record = nlohmann::json::parse(ReadWhole(path), nullptr, false);
  ASSERT_TRUE(record.is_object() && record.contains("groups")) << ReadWhole(path);
  EXPECT_EQ(record["groups"], nlohmann::json::array({a_->gid()}));
  record.erase("groups");
  std::ofstream(path, std::ios::trunc) << record.dump();

  ASSERT_TRUE(StartLtd({"--devices", "1"})) << d_.log();
  CtlAs(*a_, {"kill", holder});  // its supervisor may have ended it already (no restore window)
  const nlohmann::json ended = d_.WaitEnded(queued, 60s);
  EXPECT_EQ(ended.value("state", ""), "SUCCEEDED") << ended.dump() << d_.log();
  const std::string logs = CtlAs(*a_, {"logs", queued}).out;
  EXPECT_TRUE(Has(logs, std::to_string(g->gr_gid))) << "not the login's groups: " << logs;
}

// A supervisor free of one user's job supervises the next, another
// user's (shim/spare.h): between them it waits at idle priority holding
// no fd, thread or child of the first, and the second job's ranks are its
// own user's.
TEST_F(Security, ASupervisorServesUsersInTurnHoldingNothingOfTheLast) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  pid_t shim = 0;
  ASSERT_TRUE(WaitFor([&] { return (shim = ReadySpare(d_.state_dir())) != 0; }, 20s));
  auto proc = [](pid_t pid, const char* what) { return "/proc/" + std::to_string(pid) + what; };
  // What each fd is: the same between any two jobs, and nothing of a job's.
  auto fds = [&] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(proc(shim, "/fd"))) {
      std::error_code ec;
      out.push_back(std::filesystem::read_symlink(e.path(), ec).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  auto uids_of_ranks = [&] {
    std::vector<std::string> out;
    for (pid_t p : ProcessesWithMarker(d_.marker())) {
      std::istringstream status(ReadWhole(proc(p, "/status")));
      for (std::string line; std::getline(status, line);) {
        if (line.starts_with("Uid:")) out.push_back(line);
      }
    }
    return out;
  };
  auto run = [&](const TestUser& u) {
    const std::string id = SubmitAs(u, {"--devices", "2", "--", child_, "hang"});
    EXPECT_TRUE(WaitState(id, "RUNNING")) << d_.Show(id).dump();
    EXPECT_EQ(Supervisors(d_.state_dir(), id), std::vector<pid_t>{shim});
    const std::string uid = std::to_string(u.uid());
    const std::string mine = "Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid;
    EXPECT_TRUE(WaitFor([&] { return uids_of_ranks().size() == 2; }, 10s));
    EXPECT_EQ(uids_of_ranks(), std::vector<std::string>(2, mine));
    EXPECT_EQ(CtlAs(u, {"kill", id}).exit_code, 0);
    EXPECT_EQ(d_.WaitEnded(id).value("state", ""), "CANCELLED");
    // Free again, and the spare the next job takes.
    EXPECT_TRUE(WaitFor([&] { return IsReadySpare(d_.state_dir(), shim); }, 20s)) << d_.log();
    EXPECT_EQ(ReadWhole(proc(shim, ("/task/" + std::to_string(shim) + "/children").c_str())), "");
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(proc(shim, "/task")),
                            std::filesystem::directory_iterator{}),
              1);
    const std::vector<std::string> held = fds();
    for (const std::string& fd : held) {
      EXPECT_FALSE(Has(fd, d_.state_dir())) << fd << ": the last job's";
    }
    return held;
  };
  const std::vector<std::string> after_a = run(*a_);
  EXPECT_EQ(run(*b_), after_a);
}

// ---- 4. non-UTF-8 bytes ----

TEST_F(Security, NonUtf8ArgvIsPassedOnAndShown) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult r =
      CtlAs(*a_, {"submit", "--devices", "1", "--", child_, "argv", "caf\xe9", "\xff\xfe"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectNoSilentFailure(r);
  EXPECT_TRUE(Has(r.out, "[0] caf\xe9\n")) << r.out;
  ExpectLtdServes("1", *a_);
  EXPECT_TRUE(Has(CtlAs(*a_, {"logs", "1"}).out, "caf\xe9\n"));
}

TEST_F(Security, NonUtf8EnvValue) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult r = CtlAs(*a_, {"submit", "--devices", "1", "--env", "LT_TEST_EXTRA=caf\xe9", "--",
                            child_, "getenv:LT_TEST_EXTRA"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectNoSilentFailure(r);
  EXPECT_TRUE(Has(r.out, "LT_TEST_EXTRA=caf\xe9\n")) << r.out;
  ExpectLtdServes("1", *a_);
}

TEST_F(Security, NonUtf8WorkingDirectory) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string dir = bin_.path() + "/caf\xe9";
  mkdir(dir.c_str(), 0777);
  chmod(dir.c_str(), 0777);
  CmdResult r = CtlAs(*a_, {"submit", "--devices", "1", "--", "/bin/pwd"}, 30s, {}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectNoSilentFailure(r);
  EXPECT_TRUE(Has(r.out, "caf\xe9\n")) << r.out;
  ExpectLtdServes("1", *a_);
}

TEST_F(Security, NonUtf8ClientEnvironment) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult r = CtlAs(*a_, {"submit", "--devices", "1", "--", child_, "getenv:OLDPWD"}, 30s,
                      {"OLDPWD=/tmp/caf\xe9", "LT_\xe9=\xff"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectNoSilentFailure(r);
  EXPECT_TRUE(Has(r.out, "OLDPWD=/tmp/caf\xe9\n")) << r.out;
  ExpectLtdServes("1", *a_);
}

TEST_F(Security, NonUtf8NameIsRefusedWithOneLine) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  CmdResult r =
      CtlAs(*a_, {"submit", "--devices", "1", "--name", "caf\xe9", "--", child_, "exit:0"});
  ExpectNoSilentFailure(r);
  ExpectOneLineError(r, "--name");
  EXPECT_TRUE(ProcessAlive(d_.pid()));
  EXPECT_TRUE(AllJobs().empty()) << "a job was made";
}

TEST_F(Security, NonUtf8ErrorLineIsEscaped) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  // The byte comes from the rank (printf's octal escape), not from argv.
  CmdResult r = CtlAs(*a_, {"submit", "--devices", "2", "--", "/bin/sh", "-c",
                            "if [ $RANK = 1 ]; then printf 'error caf\\351\\n' >&3; exit 1; fi; "
                            "sleep 600"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  ExpectNoSilentFailure(r);
  EXPECT_FALSE(TrimEnd(r.err).empty());
  ExpectLtdServes("1", *a_);
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["rank"], 1);
  EXPECT_TRUE(Has(job["root_cause"].value("message", ""), "caf\\xE9")) << job["root_cause"];
  CmdResult show = CtlAs(*a_, {"show", "1"});  // the owner's view (others see no message)
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(Has(show.out, "caf\\xE9")) << show.out;
}

TEST_F(Security, NonUtf8StderrWhileTheStackIsTaken) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_TRUE(StartLtd()) << d_.log();
  // One beat, then an unterminated 0xE9 on stderr, then a hang: the
  // faulthandler traceback ltd captures continues that line.
  CmdResult r = CtlAs(
      *a_,
      {"submit", "--devices", "1", "--heartbeat-timeout", "1s", "--", "/usr/bin/python3", "-c",
       "import os, sys, time\n"
       "os.write(3, b'hb 1\\n')\n"
       "sys.stderr.buffer.write(b'\\xe9'); sys.stderr.flush()\n"
       "time.sleep(3600)\n"},
      60s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  ExpectNoSilentFailure(r);
  ExpectLtdServes("1", *a_);
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "hang");
  EXPECT_TRUE(job["hang_report"].is_object()) << job.dump();
}

// ---- 5. file modes ----

TEST_F(Security, ANameMeansTheCallersOwnJob) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string as = SubmitAs(*a_, {"--devices", "1", "--name", "train", "--", child_, "hang"});
  ASSERT_TRUE(WaitState(as, "RUNNING"));
  const std::string bs =
      SubmitAs(*b_, {"--devices", "1", "--name", "train", "--", child_, "exit:3"});
  ASSERT_EQ(d_.WaitEnded(bs)["state"], "FAILED");
  CmdResult w = CtlAs(*b_, {"wait", "train"});
  EXPECT_EQ(w.exit_code, 3) << "B's `wait train` did not mean B's job: " << w.err;
  CmdResult k = CtlAs(*b_, {"kill", "train"});
  EXPECT_EQ(k.exit_code, 1) << k.out << k.err;
  CmdResult s = CtlAs(*b_, {"kill", "--signal", "TERM", "train"});
  EXPECT_EQ(s.exit_code, 1) << s.out << s.err;
  EXPECT_EQ(d_.Show(as)["state"], "RUNNING") << "B's kill touched A's job";
  EXPECT_TRUE(d_.Show(as)["ranks"][0]["signal"].is_null()) << "B's kill signalled A's rank";
  EXPECT_EQ(CtlAs(*a_, {"kill", "train"}).exit_code, 0);
  d_.WaitEnded(as);
}

}  // namespace
}  // namespace ltd::test
