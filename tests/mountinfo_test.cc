// /proc/PID/mountinfo lines read (common/mountinfo.h): the fields a
// user names are unescaped, a line the kernel would not write is nothing.
#include "mountinfo.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

constexpr char kMountinfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "97 22 0:53 / /var/lib/ltd/jobs/7/errors rw,nosuid,nodev,noexec shared:60 - tmpfs "
    "ltd-errors rw,size=1024k,nr_inodes=21,mode=700,uid=1001,gid=1002\n"
    "98 97 0:54 / /var/lib/ltd/jobs/7/errors rw,nosuid,nodev master:3 propagate_from:2 - "
    "fuse.sshfs me@host:/a\\040b rw,user_id=1001,group_id=1002,allow_other\n"
    "99 22 0:55 / /home/u/my\\040dir rw - fuse lt_hang_fs rw\n";

TEST(FindMount, ReadsTheIdsTypeAndSourceOfTheLineWithTheId) {
  const auto tmpfs = FindMount(kMountinfo, 97);
  ASSERT_TRUE(tmpfs.has_value());
  EXPECT_EQ(tmpfs->parent, 22);
  EXPECT_EQ(tmpfs->mount_point, "/var/lib/ltd/jobs/7/errors");
  EXPECT_EQ(tmpfs->fs_type, "tmpfs");
  EXPECT_EQ(tmpfs->source, "ltd-errors");
  // Optional tags of any number before the "-".
  const auto fuse = FindMount(kMountinfo, 98);
  ASSERT_TRUE(fuse.has_value());
  EXPECT_EQ(fuse->parent, 97);
  EXPECT_EQ(fuse->fs_type, "fuse.sshfs");
  EXPECT_EQ(fuse->source, "me@host:/a b");
  // No tag at all.
  const auto bare = FindMount(kMountinfo, 99);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->mount_point, "/home/u/my dir");
  EXPECT_EQ(bare->source, "lt_hang_fs");
}

TEST(FindMount, FindsNothingForAnIdNotThereOrALineTheKernelWouldNotWrite) {
  EXPECT_FALSE(FindMount(kMountinfo, 9).has_value());
  EXPECT_FALSE(FindMount(kMountinfo, -1).has_value());
  EXPECT_FALSE(FindMount("", 1).has_value());
  // No "-" before the type; too few fields; a parent that is no number.
  EXPECT_FALSE(FindMount("5 1 0:1 / /a rw tmpfs x rw\n", 5).has_value());
  EXPECT_FALSE(FindMount("5 1 0:1 / /a rw - tmpfs\n", 5).has_value());
  EXPECT_FALSE(FindMount("5 x 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  EXPECT_FALSE(FindMount("5 -1 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  // An id is the whole first field, as the kernel writes it: "55" and "05" are not 5.
  EXPECT_FALSE(FindMount("05 1 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  EXPECT_FALSE(FindMount("55 1 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  // Nor is "-0" 0, nor "+5" 5 (fuzz/mountinfo found "-0" read as id 0).
  EXPECT_FALSE(FindMount("-0 1 0:1 / /a rw - tmpfs ltd-errors rw\n", 0).has_value());
  EXPECT_FALSE(FindMount("+5 1 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  EXPECT_FALSE(FindMount("5 -0 0:1 / /a rw - tmpfs ltd-errors rw\n", 5).has_value());
  // A path naming a tmpfs is not one.
  const auto named = FindMount("6 1 0:1 / /x\\040-\\040tmpfs rw - fuse tmpfs rw\n", 6);
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->mount_point, "/x - tmpfs");
  EXPECT_EQ(named->fs_type, "fuse");
}

}  // namespace
}  // namespace ltd::test
