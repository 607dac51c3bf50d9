// Removes directory trees on a thread of its own. Removing a job's dir is
// many unlinks on a disk that may be slow, and the loop thread must never
// wait for that: the caller renames the tree out of the way first (one
// rename), and hands the new name here.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"

namespace ltd {

// Removes `path` and everything under it on the file system and mount of
// its parent dir alone, links not followed. A file system mounted on it or
// anywhere below (a user's FUSE server, a bind mount of another tree) is
// detached, never entered: nothing in it is removed, and its server is
// asked nothing (`rm -rf` would empty it, and wait on a server that never
// answers; before Linux 5.8, which names no mount, a mount of the same
// file system is not told apart). false when something was left.
bool RemoveTree(const std::string& path);

class DirRemover {
 public:
  DirRemover() = default;
  // Stops after the tree being removed; what is left stays on disk for
  // whoever sweeps the place next (JobStore::Open).
  ~DirRemover();
  DirRemover(const DirRemover&) = delete;
  DirRemover& operator=(const DirRemover&) = delete;

  void Remove(std::string path);
  // Blocks until every tree handed over is gone (tests).
  void Drain();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started by the first Remove
};

}  // namespace ltd
