#include "output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ltd::userio {
namespace {

Outcome Error(const char* call, const std::string& object, int err) {
  return Outcome{-1, std::string(call) + "(" + object + "): " + std::strerror(err), false};
}

Outcome Refused(const std::string& path, const std::string& why) {
  return Outcome{-1, path + " is " + why, true};
}

Outcome NotAFile(const std::string& path, mode_t mode) {
  const char* what = S_ISLNK(mode)    ? "a symbolic link"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISDIR(mode)  ? "a directory"
                                      : "no regular file";
  return Refused(path, std::string(what) + "; give a regular file");
}

// Refused when `st` is a pseudo file system's.
bool OnPseudoFileSystem(const std::string& path, const struct statfs& st, Outcome* out) {
  const char* name = PseudoFileSystem(static_cast<long>(st.f_type));
  if (name == nullptr) return false;
  *out = Refused(path, std::string("on ") + name + "; give a file on an ordinary file system");
  return true;
}

}  // namespace

const char* PseudoFileSystem(long f_type) {
  // linux/magic.h's numbers (configfs's is in the kernel's fs/configfs):
  // file systems whose files are the kernel's knobs and views, not data.
  struct Kind {
    unsigned long magic;
    const char* name;
  };
  static constexpr Kind kPseudo[] = {
      {0x9fa0, "procfs"},           {0x62656572, "sysfs"},   {0x27e0eb, "cgroupfs"},
      {0x63677270, "cgroup2fs"},    {0x64626720, "debugfs"}, {0x73636673, "securityfs"},
      {0x74726163, "tracefs"},      {0xcafe4a11, "bpffs"},   {0x62656570, "configfs"},
      {0x1cd1, "devpts"},           {0x6165676c, "pstore"},  {0xde5e81e4, "efivarfs"},
      {0xf97cff8c, "selinuxfs"},    {0x43415d53, "smackfs"}, {0x42494e4d, "binfmt_misc"},
      {0x65735543, "fusectl"},      {0x6e736673, "nsfs"},    {0x7655821, "resctrl"},
      {0x19800202, "mqueue"},       {0x9fa2, "usbdevfs"},    {0x454d444d, "devmem"},
      {0x09041934, "anon_inodefs"}, {0x50495045, "pipefs"},  {0x534f434b, "sockfs"},
      {0x0187, "autofs"},
  };
  const auto magic = static_cast<unsigned long>(f_type) & 0xffffffffUL;
  for (const Kind& k : kPseudo) {
    if (k.magic == magic) return k.name;
  }
  return nullptr;
}

Outcome OpenOutputFile(const std::string& path, bool truncate) {
  // O_NONBLOCK: a FIFO with no reader must not hang the open (it is
  // refused below); O_NOFOLLOW: no link at the last component.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
  // 0666 less the umask lt-userio was given (the submitter's), as a
  // shell's `>` creates a file.
  const int fd = open(path.c_str(), flags, 0666);
  if (fd < 0) {
    if (errno == ELOOP) return Refused(path, "a symbolic link; give a regular file");
    return Error("open", path, errno);
  }
  Outcome out;
  struct stat st {};
  struct statfs fs {};
  if (fstat(fd, &st) != 0) {
    out = Error("fstat", path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    out = NotAFile(path, st.st_mode);
  } else if (fstatfs(fd, &fs) != 0) {
    out = Error("fstatfs", path, errno);
  } else if (OnPseudoFileSystem(path, fs, &out)) {
  } else if (truncate && ftruncate(fd, 0) != 0) {
    out = Error("ftruncate", path, errno);
  } else {
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    out.fd = fd;
    return out;
  }
  close(fd);
  return out;
}

Outcome CheckOutputFile(const std::string& path, bool dir_only) {
  struct stat st {};
  struct statfs fs {};
  Outcome out;
  if (!dir_only && lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return NotAFile(path, st.st_mode);
    if (statfs(path.c_str(), &fs) != 0) return Error("statfs", path, errno);
    if (OnPseudoFileSystem(path, fs, &out)) return out;
    // The process is the user throughout: access() asks for the user.
    if (access(path.c_str(), W_OK) != 0) return Error("open", path, errno);
    return out;
  }
  if (!dir_only && errno != ENOENT) return Error("stat", path, errno);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  if (statfs(dir.c_str(), &fs) == 0 && OnPseudoFileSystem(path, fs, &out)) return out;
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return Outcome{-1, "cannot create a file in " + dir + ": " + std::strerror(errno), false};
  }
  return out;
}

}  // namespace ltd::userio
