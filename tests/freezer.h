// A cgroup of the v1 freezer of the test's own, thawed and removed at the
// end whatever happened. A frozen task ignores SIGKILL until thawed, and
// /proc shows it in D state: it stands in for a process in the kernel's
// uninterruptible sleep (a driver, NFS, a FUSE server that never answers).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cgroup_fs.h"
#include "cgroup_limits.h"
#include "file_io.h"
#include "harness.h"

namespace ltd::test {

class Freezer {
 public:
  Freezer() {
    auto mount = ParseV1Mount(ReadWholeFile("/proc/self/mountinfo").value_or(""), "freezer");
    if (!mount.ok()) return;
    auto own = ParseV1Cgroup(ReadWholeFile("/proc/self/cgroup").value_or(""), "freezer");
    if (!own.ok() || mount->root != "/") return;
    dir_ = mount->mount_point + (*own == "/" ? "" : *own) + "/ltd-test-freezer-" +
           std::to_string(getpid());
    if (mkdir(dir_.c_str(), 0755) != 0) dir_.clear();
  }
  ~Freezer() {
    if (dir_.empty()) return;
    Thaw();
    WaitFor([&] { return CgroupProcs(dir_).empty(); }, 10s);
    EXPECT_EQ(rmdir(dir_.c_str()), 0) << dir_ << ": " << strerror(errno);
  }
  Freezer(const Freezer&) = delete;
  Freezer& operator=(const Freezer&) = delete;

  bool ok() const { return !dir_.empty(); }
  bool Freeze(pid_t pid) {
    if (!WriteWholeFile(dir_ + "/cgroup.procs", std::to_string(pid)).ok()) return false;
    if (!WriteWholeFile(dir_ + "/freezer.state", "FROZEN").ok()) return false;
    return WaitFor(
        [&] { return ReadWholeFile(dir_ + "/freezer.state").value_or("") == "FROZEN\n"; }, 10s);
  }
  // Frozen while empty: a task that joins it freezes at once.
  bool FreezeEmpty() {
    return WriteWholeFile(dir_ + "/freezer.state", "FROZEN").ok() &&
           WaitFor(
               [&] { return ReadWholeFile(dir_ + "/freezer.state").value_or("") == "FROZEN\n"; },
               10s);
  }
  void Thaw() { (void)WriteWholeFile(dir_ + "/freezer.state", "THAWED"); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace ltd::test
