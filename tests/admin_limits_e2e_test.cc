// A rank's resource limits are the admin's for its user (limits.d), as
// pam_limits would set them, whatever the client sends: ltctl's own
// limits, the Python client's none, a raw Submit's infinite ones. A client
// may lower them.
#include <filesystem>
#include <regex>

#include "security_fixture.h"

namespace ltd::test {
namespace {

// The rank's nofile limits, "SOFT:HARD".
const std::vector<std::string> kPrintLimits = {"/bin/sh", "-c",
                                               "echo nofile=$(ulimit -Sn):$(ulimit -Hn)"};

class AdminLimitsE2e : public Security {
 protected:
  void SetUp() override {
    Security::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (access("/etc/security/limits.d", W_OK) != 0) GTEST_SKIP() << "no /etc/security/limits.d";
    conf_ = "/etc/security/limits.d/zz-lttest-" + a_->name() + ".conf";
    std::ofstream(conf_) << "# ltd's tests: a throwaway user's, removed at the test's end\n"
                         << a_->name() << " hard nofile 300\n";
    ASSERT_EQ(chmod(conf_.c_str(), 0644), 0);
  }
  void TearDown() override {
    if (!conf_.empty()) std::filesystem::remove(conf_);
    Security::TearDown();
  }

  // What the job's rank printed: "SOFT:HARD" ("" when it printed none).
  std::string RankLimits(const std::string& id) {
    EXPECT_EQ(d_.WaitEnded(id).value("state", ""), "SUCCEEDED") << id;
    const CmdResult logs = CtlAs(*a_, {"logs", id});
    std::smatch m;
    if (!std::regex_search(logs.out, m, std::regex("nofile=([0-9]+:[0-9]+)"))) {
      ADD_FAILURE() << "no limits in " << id << "'s output: " << logs.out << logs.err;
      return "";
    }
    return m[1];
  }

  std::string conf_;
};

TEST_F(AdminLimitsE2e, RanksGetTheAdminsLimitsWhateverTheClientSends) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  // ltctl sends its own (the test's: above 300).
  std::vector<std::string> args = {"--devices", "1", "--"};
  args.insert(args.end(), kPrintLimits.begin(), kPrintLimits.end());
  EXPECT_EQ(RankLimits(SubmitAs(*a_, args)), "300:300");
  // A client that lowers its own gets the lower.
  std::string line =
      "ulimit -n 100 && exec " + ltctl_ + " --socket " + d_.socket() +
      " submit -d --devices 1 -- /bin/sh -c 'echo nofile=$(ulimit -Sn):$(ulimit -Hn)'";
  const CmdResult lowered =
      RunCommandAs(a_->As(), {"/bin/sh", "-c", line}, {d_.marker(), "HOME=" + a_->home()}, 30s);
  ASSERT_EQ(lowered.exit_code, 0) << lowered.err;
  EXPECT_EQ(RankLimits(TrimEnd(lowered.out)), "100:100");
  // Another user has no such line: not held to 300.
  const std::string b_job = SubmitAs(*b_, args);
  EXPECT_EQ(d_.WaitEnded(b_job).value("state", ""), "SUCCEEDED");
}

// The Python client sends no limits; a raw Submit may ask for infinite
// ones: both get the admin's.
TEST_F(AdminLimitsE2e, APythonClientAndARawSubmitGetTheAdminsLimits) {
#ifndef LT_PYTHON_DIR
  GTEST_SKIP() << "no Python client in this build";
#else
  if (!std::filesystem::exists(std::string(LT_PYTHON_DIR) + "/ltd/_pb/ltd_pb2.py")) {
    GTEST_SKIP() << "no Python client in this build";
  }
  ASSERT_TRUE(StartLtd()) << d_.log();
  // The package where the user may read it.
  const std::string py = bin_.path() + "/python";
  std::filesystem::copy(LT_PYTHON_DIR, py, std::filesystem::copy_options::recursive);
  ASSERT_EQ(std::system(("chmod -R a+rX " + py).c_str()), 0);
  const std::string script = R"(
import os, sys, grpc, ltd
from ltd._pb import ltd_pb2, ltd_pb2_grpc
sock = sys.argv[1]
argv = ["/bin/sh", "-c", "echo nofile=$(ulimit -Sn):$(ulimit -Hn)"]
print(ltd.Client(sock).submit(argv, 1, detach=True, cwd="/").id)
stub = ltd_pb2_grpc.LtdStub(grpc.insecure_channel("unix:" + sock))
inf = 2**64 - 1
for limits in ([], [ltd_pb2.ResourceLimit(resource="NOFILE", soft=inf, hard=inf)]):
    req = ltd_pb2.SubmitRequest(devices=1, argv=[a.encode() for a in argv], cwd=b"/",
                                env=[b"PATH=/usr/bin:/bin"], grace_ms=1000, detach=True,
                                rlimits=limits)
    for ev in stub.Submit(req, timeout=30):
        if ev.WhichOneof("event") == "accepted":
            print(ev.accepted)
)";
  const CmdResult r = RunCommandAs(
      a_->As(), {"/usr/bin/python3", "-c", script, d_.socket()},
      {d_.marker(), "HOME=" + a_->home(), "PYTHONPATH=" + py, "PYTHONDONTWRITEBYTECODE=1"}, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream ids(r.out);
  int jobs = 0;
  for (std::string id; std::getline(ids, id);) {
    if (id.empty()) continue;
    EXPECT_EQ(RankLimits(id), "300:300") << "job " << id << " (" << jobs << " of 3)";
    ++jobs;
  }
  EXPECT_EQ(jobs, 3) << r.out;
#endif
}

}  // namespace
}  // namespace ltd::test
