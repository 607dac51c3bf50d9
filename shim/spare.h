// A spare supervisor: started ahead of need, it waits at fd 4 for a job
// (process/spare_wire.h), supervises it, and, clean of it, offers itself
// for the next, up to kMaxJobsServed jobs. A job's supervisor is then a
// process already started: no exec, no static initialisers, no address
// space made and torn down a job.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "spare_wire.h"

namespace ltd {

class Spare {
 public:
  static constexpr int kAssignFd = 4;
  // Then it exits, and ltd starts another: whatever one process gathers
  // over many jobs (its heap's fragments) has a bound.
  static constexpr int kMaxJobsServed = 1000;
  // Free and given no job for this long, it gives its heap back.
  static constexpr int kTrimAfterMs = 1000;

  // Before the first job, with nothing of any job's: what is open then
  // (libuv's process-wide state made first, fd `ltd_fd` closed: each job's
  // connection comes there) is what a clean one holds.
  Spare(int argc, char** argv, int ltd_fd);

  // Waits for a job (giving back what its heap can once none came for
  // kTrimAfterMs); with it, the job's connection is fd `ltd_fd`, and ps
  // shows the job's id in place of --job's placeholder. nullopt: ltd let
  // it go, or is gone.
  std::optional<std::string> AwaitJob();

  // After a job: whether this process holds nothing of it (one thread, no
  // child, each fd open on what it was before its first job), in which case it
  // shows no job and tells ltd it is free (its heap is given back once it has
  // waited kTrimAfterMs for the next). False: it exits.
  bool OfferAnother();

 private:
  // Writes `text` over --job's value, which ltd made room in, so that ps
  // and /proc/PID/cmdline show whose supervisor this is now.
  void ShowJob(const std::string& text);
  bool Clean() const;
  struct OpenFile {
    int fd;
    dev_t dev;
    ino_t ino;
    bool operator==(const OpenFile&) const = default;
  };
  static std::optional<std::vector<OpenFile>> OpenFiles();

  int ltd_fd_;
  char* job_arg_ = nullptr;
  size_t room_ = 0;
  std::vector<OpenFile> fds_;  // open before the first job
  int served_ = 0;
};

}  // namespace ltd
