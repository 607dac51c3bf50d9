// errors/ as a tmpfs of its share of the job's log budget: a hostile
// rank's writes past it fail, and its end leaves root's copies of the
// regular files (no link followed, no FIFO blocked on) and no mount.
// Mounting needs root (skipped otherwise).
#include "error_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "job_store.h"

namespace ltd::test {
namespace {

constexpr uid_t kNobody = 65534;

TEST(ErrorDirShare, IsAMegabyteARankAtMostAnEighthOfTheBudget) {
  EXPECT_EQ(ErrorDirShare(1ull << 30, 8).bytes, 8u << 20);
  EXPECT_EQ(ErrorDirShare(10u << 20, 1).bytes, 1u << 20);
  EXPECT_EQ(ErrorDirShare(1u << 20, 4).bytes, 128u << 10);
  EXPECT_EQ(ErrorDirShare(1u << 20, 4).files, 32u);
}

class ErrorDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    char tmpl[] = "/tmp/ltd-errors.XXXXXX";
    state_ = mkdtemp(tmpl);
    auto store = JobStore::Open(state_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_.emplace(std::move(*store));
    ASSERT_TRUE(store_->CreateJobDir("1").ok());
    job_dir_ = store_->JobDir("1");
  }
  void TearDown() override {
    if (state_.empty()) return;
    EXPECT_FALSE(ErrorDirMounted(job_dir_)) << "a tmpfs is left mounted";
    umount2((job_dir_ + "/errors").c_str(), MNT_DETACH);
    if (store_) store_->DrainRemovals();
    std::filesystem::remove_all(state_);
  }

  // Runs `body` in a child that has become nobody; its exit code.
  template <typename F>
  int AsNobody(F body) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
          setresuid(kNobody, kNobody, kNobody) != 0)
        _exit(100);
      _exit(body());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
  }

  std::string state_, job_dir_;
  std::optional<JobStore> store_;
};

TEST_F(ErrorDirTest, WritesPastItsShareFailAndItsEndLeavesRootsCopiesAndNoMount) {
  const ErrorDirBound bound = ErrorDirShare(10u << 20, 1);
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, bound).ok());
  ASSERT_TRUE(ErrorDirMounted(job_dir_));
  const std::string errors = job_dir_ + "/errors";
  struct stat st {};
  ASSERT_EQ(stat(errors.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  // The rank: its error record, then six files of 10 MB, as the issue's.
  const std::string record = "{\"message\": \"boom\"}";
  const int rc = AsNobody([&] {
    std::ofstream(errors + "/error-0.json") << record;
    if (symlink("/etc/shadow", (errors + "/link").c_str()) != 0) return 1;
    if (mkfifo((errors + "/fifo").c_str(), 0600) != 0) return 2;
    const std::string chunk(1 << 20, 'x');
    uint64_t written = 0;
    int failed = 0;
    for (int f = 0; f < 6; ++f) {
      const int fd = open((errors + "/big" + std::to_string(f)).c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) {
        ++failed;
        continue;
      }
      for (int i = 0; i < 10; ++i) {
        const ssize_t n = write(fd, chunk.data(), chunk.size());
        if (n < 0) {
          if (errno == ENOSPC) ++failed;
          break;
        }
        written += static_cast<uint64_t>(n);
      }
      close(fd);
    }
    if (failed < 6) return 3;            // every file hit the bound
    if (written > (1u << 20)) return 4;  // no more than the bound went in
    // Nor many files.
    for (int f = 0; f < 100; ++f) {
      const int fd = open((errors + "/many" + std::to_string(f)).c_str(),
                          O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd < 0) return errno == ENOSPC && f < static_cast<int>(bound.files) ? 0 : 5;
      close(fd);
    }
    return 6;
  });
  ASSERT_EQ(rc, 0) << "the rank's writes went past the bound (step " << rc << ")";

  Job job;
  job.id = "1";
  job.errors.max_bytes = bound.bytes;
  job.errors.max_files = bound.files;
  EXPECT_TRUE(CloseJobErrorDir(*store_, job));
  EXPECT_FALSE(ErrorDirMounted(job_dir_));
  EXPECT_TRUE(job.errors.full);
  EXPECT_GE(job.errors.bytes, bound.bytes - 8192);
  EXPECT_LE(job.errors.bytes, bound.bytes);
  EXPECT_LE(job.errors.files, bound.files);
  // errors/ is root's now, on the disk, with root's copies of the files.
  ASSERT_EQ(lstat(errors.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(lstat((errors + "/error-0.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto kept = store_->ReadErrorFile("1", 0, 0, 1000);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, record);
  EXPECT_FALSE(std::filesystem::exists(errors + "/link")) << "a link was copied";
  EXPECT_FALSE(std::filesystem::exists(errors + "/fifo")) << "a FIFO was copied";
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/errors.kept"));
  // Closing again (ltd after its supervisor) changes nothing.
  EXPECT_FALSE(CloseJobErrorDir(*store_, job));
  EXPECT_TRUE(job.errors.full);
}

// Holes take no block of the tmpfs and none of the disk: a copy holds a
// file's data at its offsets, holes at its end are not copied, and all
// copies together are no longer than the tmpfs's size. Fails where the
// copy read the file to its end (20 GB of zeros onto the disk).
TEST_F(ErrorDirTest, ACopyHoldsDataNotHolesAndNoMoreThanTheTmpfs) {
  const ErrorDirBound bound = ErrorDirShare(10u << 20, 1);
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, bound).ok());
  const std::string errors = job_dir_ + "/errors";
  const int rc = AsNobody([&] {
    std::ofstream(errors + "/error-0.json") << "{}";
    if (truncate((errors + "/holes").c_str(), 0) != 0 && errno != ENOENT) return 1;
    const int holes = open((errors + "/holes").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (holes < 0 || ftruncate(holes, off_t{20} << 30) != 0) return 2;
    close(holes);
    // 8 KiB of data, then a 1 GiB hole: its data is kept, not the hole.
    const int head = open((errors + "/head").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    const std::string data(8192, 'h');
    if (head < 0 || write(head, data.data(), data.size()) != 8192) return 3;
    if (ftruncate(head, off_t{1} << 30) != 0) return 4;
    close(head);
    // 4 KiB of data 10 GiB in: past what the tmpfs's size lets be copied.
    const int tail = open((errors + "/tail").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (tail < 0 || pwrite(tail, data.data(), 4096, off_t{10} << 30) != 4096) return 5;
    close(tail);
    return 0;
  });
  ASSERT_EQ(rc, 0) << "step " << rc;
  Job job;
  job.id = "1";
  job.errors.max_bytes = bound.bytes;
  EXPECT_TRUE(CloseJobErrorDir(*store_, job));
  uint64_t lengths = 0, blocks = 0;
  for (const auto& e : std::filesystem::directory_iterator(errors)) {
    struct stat st {};
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
    lengths += static_cast<uint64_t>(st.st_size);
    blocks += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  EXPECT_LE(lengths, bound.bytes);
  EXPECT_LE(blocks, bound.bytes);
  EXPECT_EQ(std::filesystem::file_size(errors + "/error-0.json"), 2u);
  EXPECT_EQ(std::filesystem::file_size(errors + "/head"), 8192u);
  EXPECT_EQ(std::filesystem::file_size(errors + "/holes"), 0u);
  EXPECT_EQ(std::filesystem::file_size(errors + "/tail"), 0u);
  EXPECT_EQ(job.errors.cut_files, 3u);
  const std::vector<CutFile> cut = {{"head", 8192, uint64_t{1} << 30},
                                    {"tail", 0, (uint64_t{10} << 30) + 4096},
                                    {"holes", 0, uint64_t{20} << 30}};
  EXPECT_EQ(job.errors.cut, cut);
}

// A job pruned with its tmpfs still mounted (an ltd that stopped before
// closing it) loses the mount, not its remover's way.
TEST_F(ErrorDirTest, RemovingAJobUnmountsWhatWasLeft) {
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  ASSERT_TRUE(ErrorDirMounted(job_dir_));
  ASSERT_TRUE(store_->Remove("1").ok());
  store_->DrainRemovals();
  EXPECT_FALSE(std::filesystem::exists(job_dir_));
  EXPECT_TRUE(std::filesystem::is_empty(state_ + "/removed"));
}

// Most jobs write no error file: the dir under the mount stays their
// errors/ (root's, 0700, empty), with no copy made beside it and moved in.
TEST_F(ErrorDirTest, AJobWithoutErrorFilesKeepsTheDirUnderTheMount) {
  const std::string errors = job_dir_ + "/errors";
  struct stat made {};
  ASSERT_EQ(stat(errors.c_str(), &made), 0);
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  ASSERT_TRUE(ErrorDirMounted(job_dir_));
  // A directory is no error file: left out, as in a job that wrote some.
  ASSERT_EQ(AsNobody([&] { return mkdir((errors + "/sub").c_str(), 0700) == 0 ? 0 : 1; }), 0);
  Job job;
  job.id = "1";
  EXPECT_TRUE(CloseJobErrorDir(*store_, job));
  EXPECT_EQ(job.errors.files, 1u);
  EXPECT_FALSE(ErrorDirMounted(job_dir_));
  struct stat now {};
  ASSERT_EQ(stat(errors.c_str(), &now), 0);
  EXPECT_EQ(now.st_ino, made.st_ino) << "errors/ was replaced";
  EXPECT_EQ(now.st_uid, 0u);
  EXPECT_EQ(now.st_mode & 07777, 0700u);
  EXPECT_TRUE(std::filesystem::is_empty(errors));
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/errors.kept"));
}

// Left empty (the usual end): nothing counted, copied or kept, and the
// mount gone all the same.
TEST_F(ErrorDirTest, AnEmptyTmpfsClosesWithNothingCountedOrKept) {
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  ASSERT_TRUE(ErrorDirMounted(job_dir_));
  auto use = store_->CloseErrorDir("1");
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_TRUE(use->mounted);
  EXPECT_EQ(use->files, 0u);
  EXPECT_EQ(use->kept_files, 0u);
  EXPECT_TRUE(use->not_kept.empty()) << use->not_kept;
  EXPECT_FALSE(ErrorDirMounted(job_dir_));
  EXPECT_TRUE(std::filesystem::is_empty(job_dir_ + "/errors"));
  EXPECT_FALSE(std::filesystem::exists(job_dir_ + "/errors.kept"));
}

// The process that mounted the tmpfs knows it at the close by the mount
// it holds, without /proc/self/mountinfo (read at every job's end before,
// its size growing with every mount on the host). Checked in a mount
// namespace of a child's own whose mountinfo reads empty: a close that
// looked the tmpfs up there would not find it. The mount goes with the
// child's namespace whatever happens.
TEST_F(ErrorDirTest, ItsMounterClosesItWithoutReadingTheMountTable) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string hidden = state_ + "/empty";
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      _exit(10);
    if (close(open(hidden.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) != 0) _exit(11);
    const std::string mountinfo = "/proc/" + std::to_string(getpid()) + "/mountinfo";
    if (mount(hidden.c_str(), mountinfo.c_str(), nullptr, MS_BIND, nullptr) != 0) _exit(12);
    ErrorDirMount held;
    if (!store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1), &held).ok())
      _exit(13);
    if (!held.root.valid() || !ErrorDirMounted(job_dir_)) _exit(14);
    std::ofstream(job_dir_ + "/errors/error-0.json") << "{}";
    auto read = store_->ReadErrorFile("1", 0, 0, 100, &held);
    if (!read.ok() || *read != "{}") _exit(15);
    auto use = store_->CloseErrorDir("1", &held);
    if (!use.ok()) _exit(16);
    if (!use->mounted || use->kept_files != 1 || held.root.valid()) _exit(17);
    _exit(ErrorDirMounted(job_dir_) ? 18 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  // 16: the close did not know the tmpfs (it looked for it in mountinfo).
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The copy is on the disk, beneath every namespace's mounts.
  std::ifstream kept(job_dir_ + "/errors/error-0.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "{}");
}

// Where fsopen is refused (a kernel before 5.2, or a seccomp filter that
// does not know it; here a filter of the child's own), the tmpfs is
// mounted by mount(2), nothing is held, and the close finds it as before.
TEST_F(ErrorDirTest, WithoutFsopenItIsMountedAndFoundAsBefore) {
  const pid_t pid = fork();
  if (pid == 0) {
    sock_filter refuse_fsopen[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fsopen, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(refuse_fsopen)), refuse_fsopen};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
      _exit(10);
    ErrorDirMount held;
    if (!store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1), &held).ok())
      _exit(11);
    if (held.root.valid() || !ErrorDirMounted(job_dir_)) _exit(12);
    auto use = store_->CloseErrorDir("1", &held);
    if (!use.ok() || !use->mounted) _exit(13);
    _exit(ErrorDirMounted(job_dir_) ? 14 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// errors/ closed already (by the job's supervisor, before ltd makes sure
// at every job's end) is left as it is: no inode of the state dir is
// written again (an attribute change, even to the same owner and mode,
// is an event on the dir).
TEST_F(ErrorDirTest, ASecondCloseWritesNothing) {
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  ASSERT_TRUE(store_->CloseErrorDir("1").ok());
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, (job_dir_ + "/errors").c_str(), IN_ATTRIB | IN_MODIFY), 0);
  auto again = store_->CloseErrorDir("1");
  char events[4096];
  const ssize_t n = read(watch, events, sizeof events);
  const int err = errno;
  close(watch);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->mounted);
  EXPECT_EQ(n, -1) << "the second close changed errors/";
  EXPECT_EQ(err, EAGAIN);
  struct stat st {};
  ASSERT_EQ(stat((job_dir_ + "/errors").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// A close that finds errors/ root's and 0700 looks no further only where
// it is the job dir's own: a tmpfs left mounted there (a supervisor killed
// before it handed it over, its root still root's 0700) is still closed.
TEST_F(ErrorDirTest, ATmpfsLeftAsRootsIsStillUnmounted) {
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  const std::string errors = job_dir_ + "/errors";
  ASSERT_EQ(chown(errors.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(errors.c_str(), 0700), 0);
  ASSERT_TRUE(ErrorDirMounted(job_dir_));
  auto use = store_->CloseErrorDir("1");
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_TRUE(use->mounted);
  EXPECT_FALSE(ErrorDirMounted(job_dir_));
}

// Closed already, but a copy a close made was not put in place yet (ltd
// stopped between the two): the next close puts it there.
TEST_F(ErrorDirTest, AClosedDirStillTakesTheCopyLeftBeside) {
  ASSERT_TRUE(store_->OpenErrorDir("1", kNobody, kNobody, ErrorDirShare(1u << 20, 1)).ok());
  ASSERT_TRUE(store_->CloseErrorDir("1").ok());
  const std::string kept = job_dir_ + "/errors.kept";
  ASSERT_EQ(mkdir(kept.c_str(), 0700), 0);
  std::ofstream(kept + "/error.json") << "{}";
  auto use = store_->CloseErrorDir("1");
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_FALSE(use->mounted);
  EXPECT_EQ(access(kept.c_str(), F_OK), -1);
  EXPECT_EQ(access((job_dir_ + "/errors/error.json").c_str(), F_OK), 0);
}

// A plain errors/ of root's that is not 0700 is made so: only exactly
// root's 0700 is taken as closed.
TEST_F(ErrorDirTest, ARootsDirOfAnotherModeIsClosed) {
  const std::string errors = job_dir_ + "/errors";
  ASSERT_EQ(chmod(errors.c_str(), 0755), 0);
  ASSERT_TRUE(store_->CloseErrorDir("1").ok());
  struct stat st {};
  ASSERT_EQ(stat(errors.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// A job that never started (PENDING, cancelled) has a plain errors/, root's.
TEST_F(ErrorDirTest, ANeverOpenedDirClosesAsRootsPlainDir) {
  Job job;
  job.id = "1";
  EXPECT_FALSE(CloseJobErrorDir(*store_, job));
  EXPECT_EQ(job.errors, ErrorsDir{});
  struct stat st {};
  ASSERT_EQ(stat((job_dir_ + "/errors").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

}  // namespace
}  // namespace ltd::test
