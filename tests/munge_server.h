// A real munged for tests: Debian's /usr/sbin/munged in the foreground, a
// key the test makes (mungekey), its own socket, pid file and seed in a
// temp dir; stopped (SIGTERM, then SIGKILL) and removed on destruction.
// Tests skip with a clear message where it cannot start.
#pragma once

#include <sys/types.h>

#include <string>

namespace ltd::test {

class MungeServer {
 public:
  // Starts it and waits until its socket is there (10 s at most).
  MungeServer();
  ~MungeServer();
  MungeServer(const MungeServer&) = delete;
  MungeServer& operator=(const MungeServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }  // why not ok
  // The socket, in a 0755 directory every user can reach (munged's rule).
  std::string socket() const { return dir_ + "/munge.sock"; }
  pid_t pid() const { return pid_; }
  void Stop();

 private:
  static std::string ReadLog(const std::string& path);

  pid_t pid_ = 0;
  std::string dir_;
  bool ok_ = false;
  std::string error_;
};

}  // namespace ltd::test
