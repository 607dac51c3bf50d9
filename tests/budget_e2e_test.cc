// The state dir shared between users (issue 28), end to end against a real
// ltd through the real ltctl, as two throwaway users: a rank that fills
// its errors/ dir stays within its job's --job-max-log-bytes (its writes
// past it fail, the record says so, no mount is left after the job, after
// a restart of ltd, or after its supervisor died), and one user's log
// volume under --max-state-bytes neither prunes another user's records
// nor refuses their submits. Needs root (skipped otherwise).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness.h"
#include "mount_scan.h"
#include "two_users_fixture.h"

namespace ltd::test {
namespace {

namespace fs = std::filesystem;

// Bytes allocated under `dir`, mounts below it included (as `du`).
uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       it != end; it.increment(ec)) {
    struct stat st {};
    if (lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

bool Listed(const CmdResult& ps, const std::string& id) {
  const auto list = nlohmann::json::parse(ps.out, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return false;
  for (const auto& j : list) {
    if (j.value("id", "") == id) return true;
  }
  return false;
}

class Budget : public TwoUsersTest {
 protected:
  Budget() : TwoUsersTest("ltb") {}

  // A rank of A's that writes its error record, then six files of 10 MB
  // beside it (saying which were refused), then waits for `gate` and
  // exits 3.
  std::vector<std::string> Filler(const std::string& gate) const {
    return {"--devices",
            "1",
            "--",
            "/bin/sh",
            "-c",
            "printf '{\"message\": \"boom from A\"}' > \"$TORCHELASTIC_ERROR_FILE\"; "
            "d=$(dirname \"$TORCHELASTIC_ERROR_FILE\"); "
            "for i in 1 2 3 4 5 6; do "
            "  if head -c 10000000 /dev/zero > \"$d/f$i\" 2>/dev/null; "
            "  then echo \"wrote $i\"; else echo \"refused $i\"; fi; "
            "done; echo filled; exec " +
                child_ + " waitfile:" + gate + ",exit:3"};
  }

  bool Filled(const std::string& id) const { return Has(CtlAs(*a_, {"logs", id}).out, "filled"); }

  std::string Gate() const { return bin_.path() + "/gate-" + std::to_string(gates_++); }
  static void Open(const std::string& gate) { std::ofstream(gate) << "go"; }

  mutable int gates_ = 0;
};

// The issue's: six 10 MB files under --job-max-log-bytes 10M. The writes
// past the budget fail, the state dir holds no more than the budget, the
// other user's submit is taken and their job kept, and the job's record
// says errors/ was full; a restart of ltd in between changes nothing, and
// no mount is left once the job ended.
TEST_F(Budget, ARankFillingErrorsStaysWithinItsJobsBudget) {
  // Jobs outlive ltd (the harness's default is --restore-window 0).
  const std::vector<std::string> args = {"--job-max-log-bytes", "10M", "--max-state-bytes", "40M",
                                         "--restore-window",    "1m"};
  ASSERT_TRUE(d_.Start(args)) << d_.log();
  const std::string quiet = SubmitAs(*b_, {"--devices", "1", "--", child_, "print:3"});
  ASSERT_EQ(d_.WaitEnded(quiet).value("state", ""), "SUCCEEDED");

  const std::string gate = Gate();
  const std::string id = SubmitAs(*a_, Filler(gate));
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitFor([&] { return Filled(id); }, 60s)) << CtlAs(*a_, {"logs", id}).out;
  const std::string out = CtlAs(*a_, {"logs", id}).out;
  for (int i = 1; i <= 6; ++i) {
    EXPECT_TRUE(Has(out, "refused " + std::to_string(i))) << "file " << i << " went in:\n" << out;
  }
  const uint64_t used = DiskBytes(d_.state_dir());
  std::fprintf(stderr, "state dir: %llu bytes with errors/ filled\n",
               static_cast<unsigned long long>(used));
  EXPECT_LE(used, 10u << 20) << "the state dir grew past the job's budget";
  EXPECT_EQ(MountsUnder(d_.state_dir()),
            std::vector<std::string>{d_.state_dir() + "/jobs/" + id + "/errors"});

  // The other user is served, and their records are kept.
  const std::string next = SubmitAs(*b_, {"--devices", "1", "--", child_, "print:3"});
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(d_.WaitEnded(next).value("state", ""), "SUCCEEDED");
  const CmdResult logs = CtlAs(*b_, {"logs", quiet});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Has(logs.out, "line 2 of 3")) << logs.out;

  // ltd restarts under the job: the supervisor keeps the job and its tmpfs.
  ASSERT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start(args)) << d_.log();
  ASSERT_TRUE(WaitState(id, "RUNNING"));
  EXPECT_EQ(MountsUnder(d_.state_dir()).size(), 1u);

  Open(gate);
  const nlohmann::json ended = d_.WaitEnded(id);
  EXPECT_EQ(ended.value("exit_code", 0), 3) << ended.dump();
  EXPECT_EQ(ended["root_cause"].value("message", ""), "boom from A") << ended.dump();
  EXPECT_EQ(ended["errors"].value("full", false), true) << ended.dump();
  EXPECT_EQ(ended["errors"].value("max_bytes", uint64_t{0}), uint64_t{1} << 20) << ended.dump();
  const CmdResult show = CtlAs(*a_, {"show", id});
  EXPECT_TRUE(Has(show.out, "errors/: full")) << show.out;
  EXPECT_TRUE(MountsUnder(d_.state_dir()).empty()) << "the job's tmpfs is left mounted";
  // What the rank left is root's now, and no more than the budget.
  const std::string errors = d_.state_dir() + "/jobs/" + id + "/errors";
  struct stat st {};
  ASSERT_EQ(stat(errors.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_TRUE(fs::exists(errors + "/error-0.json"));
  EXPECT_LE(DiskBytes(d_.state_dir()), 10u << 20);
  for (const std::string& kept : {quiet, next}) {
    EXPECT_TRUE(Listed(d_.Ctl({"--json", "ps", "-a"}), kept)) << "job " << kept << " was pruned";
  }
}

// The job's supervisor dies (SIGKILL) while errors/ is mounted: ltd ends
// the job LOST and unmounts it.
TEST_F(Budget, AJobWhoseSupervisorDiedLeavesNoMount) {
  ASSERT_TRUE(d_.Start({"--job-max-log-bytes", "10M"})) << d_.log();
  const std::string gate = Gate();
  const std::string id = SubmitAs(*a_, Filler(gate));
  ASSERT_TRUE(WaitFor([&] { return Filled(id); }, 60s));
  ASSERT_EQ(MountsUnder(d_.state_dir()).size(), 1u);
  const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(shims.size(), 1u);
  ASSERT_EQ(kill(shims[0], SIGKILL), 0);
  const nlohmann::json ended = d_.WaitEnded(id);
  EXPECT_EQ(ended.value("state", ""), "LOST") << ended.dump();
  EXPECT_EQ(ended["errors"].value("full", false), true) << ended.dump();
  EXPECT_TRUE(MountsUnder(d_.state_dir()).empty()) << "the job's tmpfs is left mounted";
  Open(gate);
}

// The issue's: a rank leaves a 20 GB file of holes in errors/ (no block of
// the tmpfs) and exits 1. Its copy onto the disk holds its data, not its
// holes: the state dir grows by at most the tmpfs's size (1 MiB here), and
// the record and `show` say what was cut.
TEST_F(Budget, AFileOfHolesInErrorsIsCopiedAsItsDataAlone) {
  ASSERT_TRUE(d_.Start({"--job-max-log-bytes", "10M"})) << d_.log();
  const uint64_t before = DiskBytes(d_.state_dir());
  const std::string id =
      SubmitAs(*a_, {"--devices", "1", "--", "/bin/sh", "-c",
                     "printf '{\"message\": \"holes\"}' > \"$TORCHELASTIC_ERROR_FILE\"; "
                     "truncate -s 20G \"$(dirname \"$TORCHELASTIC_ERROR_FILE\")/holes\"; exit 1"});
  ASSERT_FALSE(id.empty());
  const nlohmann::json ended = d_.WaitEnded(id, 120s);
  EXPECT_EQ(ended.value("state", ""), "FAILED") << ended.dump();
  const uint64_t max = ended["errors"].value("max_bytes", uint64_t{0});
  EXPECT_EQ(max, uint64_t{1} << 20) << ended.dump();
  const uint64_t grown = DiskBytes(d_.state_dir()) - before;
  std::fprintf(stderr, "state dir grew by %llu bytes\n", static_cast<unsigned long long>(grown));
  EXPECT_LE(grown, max + (256u << 10)) << "more than the tmpfs held went onto the disk";
  // Not even as a file that only says it is 20 GB long.
  const std::string errors = d_.state_dir() + "/jobs/" + id + "/errors";
  uint64_t lengths = 0;
  for (const auto& e : fs::directory_iterator(errors)) lengths += fs::file_size(e.path());
  EXPECT_LE(lengths, max);
  const nlohmann::json& cut = ended["errors"]["cut"];
  ASSERT_TRUE(cut.is_array() && cut.size() == 1) << ended.dump();
  EXPECT_EQ(cut[0].value("name", ""), "holes");
  EXPECT_EQ(cut[0].value("kept", uint64_t{1}), 0u);
  EXPECT_EQ(cut[0].value("size", uint64_t{0}), uint64_t{20} << 30);
  EXPECT_EQ(ended["root_cause"].value("message", ""), "holes") << ended.dump();
  const CmdResult show = CtlAs(*a_, {"show", id});
  EXPECT_TRUE(Has(show.out, "errors/: holes (20G long) not kept")) << show.out;
  EXPECT_TRUE(MountsUnder(d_.state_dir()).empty()) << "the job's tmpfs is left mounted";
}

// Under a small --max-state-bytes: four chatty jobs of A and a quiet
// finished job of B. A's own jobs go to make room, never B's; while A's
// live jobs fill the state dir, B's submit is taken and A's refused, in
// one line that says what to do.
TEST_F(Budget, OneUsersLogVolumeLeavesTheQuietUsersRecords) {
  ASSERT_TRUE(d_.Start({"--max-state-bytes", "2M", "--job-max-log-bytes", "1M"})) << d_.log();
  const std::string quiet = SubmitAs(*b_, {"--devices", "1", "--", child_, "print:3"});
  ASSERT_EQ(d_.WaitEnded(quiet).value("state", ""), "SUCCEEDED");
  // About 610K of log each: the fourth passes the bound.
  std::vector<std::string> chatty;
  for (int i = 0; i < 4; ++i) {
    chatty.push_back(SubmitAs(*a_, {"--devices", "1", "--", child_, "print:12000"}));
    ASSERT_EQ(d_.WaitEnded(chatty.back()).value("state", ""), "SUCCEEDED");
  }
  CmdResult ps = d_.Ctl({"--json", "ps", "-a"});
  EXPECT_TRUE(Listed(ps, quiet)) << "B's job was pruned for A's logs";
  EXPECT_FALSE(Listed(ps, chatty.front())) << "A's oldest job was kept over the bound";
  CmdResult logs = CtlAs(*b_, {"logs", quiet});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_TRUE(Has(logs.out, "line 2 of 3")) << logs.out;

  // Three live jobs of A, taken while the dir has room, then ~900K of log
  // each: A's live jobs alone fill the 2M.
  const std::string gate = Gate();
  std::vector<std::string> live;
  for (int i = 0; i < 3; ++i) {
    live.push_back(
        SubmitAs(*a_, {"--devices", "1", "--", child_, "waitfile:" + gate + ",print:20000,hang"}));
    ASSERT_FALSE(live.back().empty());
  }
  Open(gate);
  for (const std::string& id : live) {
    ASSERT_TRUE(WaitFor(
        [&] {
          return Has(CtlAs(*a_, {"logs", id, "--tail", "1"}).out, "line 19999");
        },
        60s))
        << id;
  }
  const CmdResult refused = CtlAs(*a_, {"submit", "-d", "--devices", "1", "--", child_, "print:3"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_TRUE(Has(refused.err, "the state dir is full: your jobs take")) << refused.err;
  EXPECT_TRUE(Has(refused.err, "--max-state-bytes 2048K shared by 2 users")) << refused.err;
  EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
  const std::string taken = SubmitAs(*b_, {"--devices", "1", "--", child_, "print:3"});
  ASSERT_FALSE(taken.empty()) << "B was refused for A's live jobs";
  EXPECT_EQ(d_.WaitEnded(taken).value("state", ""), "SUCCEEDED");
  ps = d_.Ctl({"--json", "ps", "-a"});
  EXPECT_TRUE(Listed(ps, quiet)) << "B's job was pruned for A's live jobs";
  logs = CtlAs(*b_, {"logs", quiet});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  for (const std::string& id : live) ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (const std::string& id : live) d_.WaitEnded(id);
}

}  // namespace
}  // namespace ltd::test
