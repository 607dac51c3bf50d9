#include "munge_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "str_util.h"

extern char** environ;

namespace ltd::test {
namespace {

// Runs argv to its end (5 s at most); its exit code, or -1.
int RunQuietly(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv = CStrings(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

MungeServer::MungeServer() {
  const char* bin = "/usr/sbin/munged";
  const char* keygen = "/usr/sbin/mungekey";
  if (access(bin, X_OK) != 0 || access(keygen, X_OK) != 0) {
    error_ = "munged is not installed (/usr/sbin/munged; apt-get install munge)";
    return;
  }
  if (geteuid() != 0) {
    error_ = "munged runs here as root (its key and socket are root's); run the test as root";
    return;
  }
  char tmpl[] = "/tmp/ltd-munge.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    error_ = std::string("mkdtemp: ") + std::strerror(errno);
    return;
  }
  dir_ = tmpl;
  // munged refuses a socket in a directory not every user may enter.
  chmod(dir_.c_str(), 0755);
  const std::string log = dir_ + "/munged.log";
  if (RunQuietly({keygen, "--create", "--keyfile=" + dir_ + "/munge.key"}, log) != 0) {
    error_ = "mungekey could not make a key; see " + log;
    return;
  }
  std::vector<std::string> args = {bin,
                                   "--foreground",
                                   "--key-file=" + dir_ + "/munge.key",
                                   "--socket=" + socket(),
                                   "--pid-file=" + dir_ + "/munged.pid",
                                   "--seed-file=" + dir_ + "/munged.seed",
                                   "--log-file=" + log,
                                   "--num-threads=4"};
  std::vector<char*> argv = CStrings(args);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&pid_, bin, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = 0;
    error_ = std::string("cannot start munged: ") + std::strerror(rc);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      error_ = "munged exited at start: " + ReadLog(log);
      return;
    }
    struct stat st {};
    if (stat(socket().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      ok_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  error_ = "munged made no socket within 10 s";
}

std::string MungeServer::ReadLog(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf, f);
    text.assign(buf, n);
    std::fclose(f);
  }
  return text;
}

void MungeServer::Stop() {
  if (pid_ == 0) return;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = 0;
}

MungeServer::~MungeServer() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace ltd::test
