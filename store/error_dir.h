// A job's errors/ dir, <job dir>/errors: the one place in the state dir a
// rank writes (its TORCHELASTIC_ERROR_FILE). It is part of the job's log
// budget (--job-max-log-bytes), and a hostile rank must not go past it
// however it writes: under ltd it is a tmpfs of its own, mounted while the
// job runs with a size and an inode count (size=, nr_inodes=), owned by the
// job's user. A write past it fails (ENOSPC) in the rank; the disk of the
// state dir does not grow at all meanwhile (the pages are the rank's memory,
// charged to its cgroup). At the job's end its regular files are copied,
// as root's, onto the disk beside the job's log (within the same bound)
// and the tmpfs is unmounted (detached: a process stuck in the kernel
// with a file open there keeps only its own pages alive).
//
// errors/ is the user's while the job runs, so they can mount a FUSE file
// system of theirs on it (fusermount3), or on a file in it. Root reads
// nothing through such a mount: a server that never answers would hold a
// root supervisor, or ltd, in the kernel, and one that lies would make
// the record say what the user likes. errors/ is reached by fds that name
// the tmpfs itself (O_PATH and the mount's id, which ask the file system
// nothing); what is mounted over it is detached first, and the copy is
// taken from a clone of the tmpfs alone. A copy holds
// data, not holes, and all of them together no more than the tmpfs's size:
// a 20 GB file of holes takes no block of the tmpfs, and must take none of
// the disk either. What does not fit is cut, and the record says so.
//
// Why a tmpfs: it bounds bytes and files in the kernel, for any writer, on
// every Linux and every file system under the state dir, and needs no
// mkfs, loop device or quota set up on the host (a project quota needs
// ext4's `project` feature or XFS's prjquota; a loop device a file system
// image per job). Where it cannot be mounted (not root: ltrun), errors/ is
// a plain dir of the user's and only the state dir's bound
// (--max-state-bytes, per user) holds it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fd.h"
#include "job.h"

namespace ltd {

// errors/'s part of a job's --job-max-log-bytes: 1 MiB a rank (a
// torchelastic error record is a traceback of a few KiB), at most an
// eighth of the budget; the rank log gets the rest.
struct ErrorDirBound {
  uint64_t bytes = 0;
  uint64_t files = 0;
};
ErrorDirBound ErrorDirShare(uint64_t job_max_log_bytes, int ranks);

// What a job's ranks left in errors/, learned when it is closed.
struct ErrorDirUse {
  bool mounted = false;  // it was the job's tmpfs (else a plain dir: nothing counted)
  uint64_t bytes = 0;    // in use on the tmpfs at the end
  uint64_t files = 0;
  bool full = false;        // no byte or no inode was left: writes past it failed
  uint64_t kept_files = 0;  // regular files copied onto the disk
  std::string not_kept;     // why some were not (a full disk); "" when all were
  // Copies cut short: a file's first CutFile::kept bytes were kept, holes
  // within them as holes (at most ErrorsDir::kMaxCutListed named).
  std::vector<CutFile> cut;
  uint64_t cut_files = 0;
};

// errors/ inside `job_dir`, root's and 0700: nobody writes there before
// the job starts (a PENDING job may wait for days).
absl::Status MakeErrorDir(const std::string& job_dir);

// The tmpfs as OpenErrorDir mounted it, kept by the process that mounted
// it until the close: the fd of its root holds its mount's id (no other
// mount can take that id while the fd is open, detached or not), so the
// close and a read of an error file know the tmpfs by that id alone, where
// otherwise they read /proc/self/mountinfo, which grows with every mount
// on the host (~250 us a read with 500 mounts). Empty where the tmpfs was
// not mounted, or was mounted by mount(2) (before Linux 5.2, or where
// fsopen is refused): the mount on errors/ is then looked up.
struct ErrorDirMount {
  Fd root;  // O_PATH
  int64_t id = -1;
};

// The job starts: errors/ becomes its user's. With `bound`, as a tmpfs of
// that size mounted over it (held in `*mounted` when given); without, or
// when the mount fails, the plain dir is handed over (the error says why
// it is not bounded, and the dir is the user's anyway).
absl::Status OpenErrorDir(const std::string& job_dir, uid_t uid, gid_t gid,
                          const std::optional<ErrorDirBound>& bound,
                          ErrorDirMount* mounted = nullptr);

// The job ended: its tmpfs, if any, is copied onto the disk and unmounted;
// errors/ becomes root's (0700), so the user writes nothing more there.
// Safe to call again, and on a dir that was never opened. A copy the disk
// refused is in `not_kept`: the mount goes all the same. `mounted`, what
// OpenErrorDir held, is let go.
absl::StatusOr<ErrorDirUse> CloseErrorDir(const std::string& job_dir,
                                          ErrorDirMount* mounted = nullptr);

// What a close found goes into the job's record; whether it changed it.
bool NoteErrorDirUse(const ErrorDirUse& use, ErrorsDir& errors);

// Whether errors/ in `job_dir` is a mount point now (asking no file
// system mounted there anything).
bool ErrorDirMounted(const std::string& job_dir);
// Detaches every mount on errors/ in `job_dir`, the top one first, each by
// an fd that names it: what a close left mounted.
absl::Status DetachErrorDir(const std::string& job_dir);

// What a rank left in errors/`name`: at most `max` bytes of a regular file
// of `uid` (no link to someone else's file, no FIFO to block on, no file
// system mounted over errors/ or the file). NotFound when there is none.
absl::StatusOr<std::string> ReadErrorFile(const std::string& job_dir, const std::string& name,
                                          uid_t uid, size_t max,
                                          const ErrorDirMount* mounted = nullptr);

}  // namespace ltd
