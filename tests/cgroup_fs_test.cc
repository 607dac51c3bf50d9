// The cgroup filesystem's parsers: where cgroup2 is mounted (mountinfo,
// octal escapes included) and a process's unified cgroup.
#include "cgroup_fs.h"

#include <gtest/gtest.h>

namespace ltd {
namespace {

TEST(CgroupFs, ParsesMountinfoOnHybridAndUnifiedHosts) {
  const std::string hybrid =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n";
  auto m = ParseCgroup2Mount(hybrid);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(m->root, "/");
  auto escaped = ParseCgroup2Mount("7 1 0:5 /a\\040b /mnt/c\\040g rw - cgroup2 none rw\n");
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(escaped->mount_point, "/mnt/c g");
  EXPECT_EQ(escaped->root, "/a b");
  EXPECT_TRUE(absl::IsNotFound(ParseCgroup2Mount(hybrid.substr(0, hybrid.find("41 "))).status()));

  auto own = ParseUnifiedCgroup("12:pids:/x\n0::/system.slice/ltd.service\n");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, "/system.slice/ltd.service");
  EXPECT_FALSE(ParseUnifiedCgroup("1:name=systemd:/\n").ok());
}

// cpu.stat's first line, as every cgroup v2 has it (with or without the cpu
// controller); anything else is no count.
TEST(CgroupFs, ReadsTheCpuTimeOfCpuStat) {
  EXPECT_EQ(ParseCpuStatUsage("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n"),
            std::chrono::microseconds(1'234'567));
  EXPECT_EQ(ParseCpuStatUsage("nr_periods 0\nusage_usec 0"), std::chrono::microseconds(0));
  EXPECT_FALSE(ParseCpuStatUsage(""));
  EXPECT_FALSE(ParseCpuStatUsage("user_usec 5\n"));
  EXPECT_FALSE(ParseCpuStatUsage("usage_usec \n"));
  EXPECT_FALSE(ParseCpuStatUsage("usage_usec -1\n"));
  EXPECT_FALSE(ParseCpuStatUsage("usage_usec 12x\n"));
  EXPECT_FALSE(ParseCpuStatUsage("usage_usec 99999999999999999999\n"));
  EXPECT_FALSE(ParseCpuStatUsage("xusage_usec 5\n"));
}

}  // namespace
}  // namespace ltd
