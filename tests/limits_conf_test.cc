// limits.conf as pam_limits applies it (model/limits_conf.h), and the files
// ltd reads for a user (daemon/api/admin_limits.h): the admin's limits,
// whatever a client asks.
#include "limits_conf.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "admin_limits.h"

namespace ltd::test {
namespace {

constexpr uint64_t kInf = RLIM_INFINITY;

LimitsUser Alice() {
  LimitsUser u;
  u.name = "alice";
  u.uid = 1500;
  u.gid = 1500;
  u.gids = {1500, 27, 3000};
  u.groups = {"alice", "sudo", "gpu"};
  return u;
}

const std::vector<ResourceLimit> kBase = {{RLIMIT_NOFILE, 1024, 524288},
                                          {RLIMIT_NPROC, 4000, 8000},
                                          {RLIMIT_MEMLOCK, 8 << 20, 8 << 20},
                                          {RLIMIT_CPU, kInf, kInf}};

ResourceLimit Of(const std::vector<ResourceLimit>& all, int resource) {
  for (const ResourceLimit& l : all) {
    if (l.resource == resource) return l;
  }
  return {};
}

ResourceLimit Applied(const LimitsUser& u, std::initializer_list<std::string_view> files,
                      int resource) {
  LimitsConf conf(u, kBase);
  for (std::string_view f : files) conf.Apply(f);
  return Of(conf.Result(), resource);
}

TEST(LimitsConf, HardSoftAndBothWithUnitsAndUnlimited) {
  EXPECT_EQ(Applied(Alice(), {"alice hard nofile 300\n"}, RLIMIT_NOFILE),
            (ResourceLimit{RLIMIT_NOFILE, 300, 300}))
      << "a soft limit above the hard one is lowered to it";
  EXPECT_EQ(Applied(Alice(), {"alice - nproc 50"}, RLIMIT_NPROC),
            (ResourceLimit{RLIMIT_NPROC, 50, 50}));
  EXPECT_EQ(Applied(Alice(), {"alice soft nproc 10 # a comment"}, RLIMIT_NPROC),
            (ResourceLimit{RLIMIT_NPROC, 10, 8000}));
  // memlock in KiB, cpu in minutes; names and types in any case.
  EXPECT_EQ(Applied(Alice(), {"alice HARD MemLock 64"}, RLIMIT_MEMLOCK),
            (ResourceLimit{RLIMIT_MEMLOCK, 64 * 1024, 64 * 1024}));
  EXPECT_EQ(Applied(Alice(), {"alice - cpu 2"}, RLIMIT_CPU), (ResourceLimit{RLIMIT_CPU, 120, 120}));
  EXPECT_EQ(Applied(Alice(), {"alice - nproc unlimited"}, RLIMIT_NPROC),
            (ResourceLimit{RLIMIT_NPROC, kInf, kInf}));
  EXPECT_EQ(Applied(Alice(), {"alice - nproc infinity\nalice soft nproc -1"}, RLIMIT_NPROC),
            (ResourceLimit{RLIMIT_NPROC, kInf, kInf}));
  // The kernel takes no infinite fd limit: the line changes nothing.
  EXPECT_EQ(Applied(Alice(), {"alice - nofile unlimited"}, RLIMIT_NOFILE), kBase[0]);
}

TEST(LimitsConf, TheMoreSpecificLineWinsThenTheLater) {
  const std::string_view conf =
      "alice hard nofile 300\n"
      "@gpu hard nofile 5000\n"
      "* hard nofile 100\n";
  EXPECT_EQ(Applied(Alice(), {conf}, RLIMIT_NOFILE).hard, 300u);
  // A later file's group line does not beat an earlier file's user line...
  EXPECT_EQ(Applied(Alice(), {conf, "@gpu hard nofile 9000"}, RLIMIT_NOFILE).hard, 300u);
  // ...but a later file's user line does.
  EXPECT_EQ(Applied(Alice(), {conf, "alice hard nofile 200"}, RLIMIT_NOFILE).hard, 200u);
  // A group over `*`, whichever comes first.
  EXPECT_EQ(Applied(Alice(), {"@gpu hard nofile 5000\n* hard nofile 100"}, RLIMIT_NOFILE).hard,
            5000u);
  EXPECT_EQ(Applied(Alice(), {"* hard nofile 100\n@nogroup hard nofile 7"}, RLIMIT_NOFILE).hard,
            100u);
  // Soft and hard are judged apart.
  EXPECT_EQ(Applied(Alice(), {"alice soft nofile 64\n* hard nofile 128"}, RLIMIT_NOFILE),
            (ResourceLimit{RLIMIT_NOFILE, 64, 128}));
}

TEST(LimitsConf, UidAndGidRanges) {
  EXPECT_EQ(Applied(Alice(), {"1000: hard nproc 100"}, RLIMIT_NPROC).hard, 100u);
  EXPECT_EQ(Applied(Alice(), {"1000:1499 hard nproc 100"}, RLIMIT_NPROC).hard, 8000u);
  EXPECT_EQ(Applied(Alice(), {":1500 hard nproc 42\nalice hard nproc 43"}, RLIMIT_NPROC).hard, 43u);
  // An exact gid looks at every group; a range at the primary one only.
  EXPECT_EQ(Applied(Alice(), {"@:3000 hard nproc 30"}, RLIMIT_NPROC).hard, 30u);
  EXPECT_EQ(Applied(Alice(), {"@2000:4000 hard nproc 30"}, RLIMIT_NPROC).hard, 8000u);
  EXPECT_EQ(Applied(Alice(), {"@1000:2000 hard nproc 30"}, RLIMIT_NPROC).hard, 30u);
}

TEST(LimitsConf, RootGetsItsOwnLinesOnly) {
  LimitsUser root;
  root.name = "root";
  root.gids = {0};
  root.groups = {"root"};
  EXPECT_EQ(
      Applied(root, {"* hard nproc 10\n@root hard nproc 11\n0: hard nproc 12"}, RLIMIT_NPROC).hard,
      8000u);
  EXPECT_EQ(Applied(root, {"root hard nproc 13"}, RLIMIT_NPROC).hard, 13u);
}

TEST(LimitsConf, MalformedLinesAreSkippedAndCounted) {
  LimitsConf conf(Alice(), kBase);
  EXPECT_EQ(conf.Apply("alice hard nofile\n"
                       "alice medium nofile 5\n"
                       "alice hard bogus 5\n"
                       "alice hard nofile 5x\n"
                       "alice hard nofile 99999999999999999999999\n"
                       "alice hard nofile 10 extra\n"
                       "alice -\n"
                       "alice hard maxlogins 3\n"
                       "%gpu hard maxlogins 2\n"
                       "\n   \t\n# only a comment\n"),
            6u);
  EXPECT_EQ(conf.Result(), kBase);
  // A line past the bound is skipped; the bytes past kMaxBytes are not read.
  LimitsConf big(Alice(), kBase);
  EXPECT_EQ(big.Apply("alice hard nofile 7" + std::string(LimitsConf::kMaxLineBytes, ' ')), 1u);
  std::string huge(LimitsConf::kMaxBytes, '\n');
  big.Apply(huge + "alice hard nofile 7\n");
  EXPECT_EQ(big.Result(), kBase);
}

// ltd reads the files at each submit: a stock limits.conf (comments only)
// costs no lookup of the user in NSS; the first line with a domain looks
// them up, once, whatever follows.
TEST(LimitsConf, TheUserIsLookedUpOnlyOnceALineNamesADomain) {
  int lookups = 0;
  auto who = [&lookups] {
    ++lookups;
    return Alice();
  };
  LimitsConf stock(who, kBase);
  EXPECT_EQ(stock.Apply("# /etc/security/limits.conf\n#\n#<domain> <type> <item> <value>\n"
                        "#*               soft    core            0\n\n   \t\n"),
            0u);
  EXPECT_EQ(lookups, 0);
  EXPECT_EQ(stock.Result(), kBase);

  LimitsConf set(who, kBase);
  set.Apply("# a comment\n@gpu hard nofile 4096\n");
  EXPECT_EQ(lookups, 1);
  set.Apply("* soft nofile 2048\nbob hard nproc 10\n");
  EXPECT_EQ(lookups, 1);
  EXPECT_EQ(Of(set.Result(), RLIMIT_NOFILE), (ResourceLimit{RLIMIT_NOFILE, 2048, 4096}));
  EXPECT_EQ(Of(set.Result(), RLIMIT_NPROC), Of(kBase, RLIMIT_NPROC));
}

TEST(LimitsConf, HugeValuesSaturate) {
  EXPECT_EQ(Applied(Alice(), {"alice - memlock 18446744073709551614"}, RLIMIT_MEMLOCK).hard, kInf);
}

// The files as ltd reads them: limits.conf, then limits.d/*.conf in name
// order; a file others may write is skipped; never above ltd's own hard.
TEST(AdminLimits, ReadsTheAdminsFilesInOrderAndSkipsOnesOthersMayWrite) {
  if (geteuid() != 0) GTEST_SKIP() << "the files must be root's";
  const std::string dir = std::filesystem::temp_directory_path() / "limits-test.XXXXXX";
  std::vector<char> tmpl(dir.begin(), dir.end());
  tmpl.push_back('\0');
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string root = tmpl.data();
  std::filesystem::create_directory(root + "/limits.d");
  auto write = [&](const std::string& name, const std::string& text, mode_t mode = 0644) {
    std::ofstream(root + "/" + name) << text;
    ASSERT_EQ(chmod((root + "/" + name).c_str(), mode), 0);
  };
  write("limits.conf", "* hard nofile 900\n");
  write("limits.d/10-a.conf", "* hard nofile 800\n");
  write("limits.d/20-b.conf", "* hard nofile 700\n");
  write("limits.d/30-c.conf", "* hard nofile 5\n", 0666);  // others may write it: skipped
  write("limits.d/40-d.txt", "* hard nofile 6\n");         // not *.conf
  write("limits.d/.50-e.conf", "* hard nofile 7\n");       // hidden
  ASSERT_EQ(mkfifo((root + "/limits.d/60-f.conf").c_str(), 0644), 0);  // would block a reader
  write("limits.d/70-g.conf", "* hard nproc 99999999\n");              // above ltd's own hard
  const std::vector<ResourceLimit> start = {{RLIMIT_NOFILE, 1024, 4096}, {RLIMIT_NPROC, 100, 200}};
  const std::vector<ResourceLimit> got = AdminLimits(65534, 65534, root, start);
  EXPECT_EQ(Of(got, RLIMIT_NOFILE), (ResourceLimit{RLIMIT_NOFILE, 700, 700}));
  EXPECT_EQ(Of(got, RLIMIT_NPROC), (ResourceLimit{RLIMIT_NPROC, 100, 200}));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ltd::test
