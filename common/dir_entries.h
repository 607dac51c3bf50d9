// A directory's entries read with getdents64 into a buffer of the
// caller's, without a DIR: fdopendir asks fstat and fcntl twice of an fd
// it is handed, and opendir fstat of one it opens. Three system calls a
// directory where a job's end lists two or three of them.
#pragma once

#include <dirent.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace ltd {

// Calls fn(name) for every entry of the open dir `fd` but "." and "..",
// until fn returns false or the dir ends. False when a read failed (what
// was read before was given). The fd stays the caller's; reading starts
// where its offset is.
template <typename Fn>
bool ForEachDirEntry(int fd, Fn&& fn) {
  // A job's dir fits in one read; a larger dir takes several.
  alignas(8) char buf[4096];
  for (;;) {
    const ssize_t n = getdents64(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    for (size_t at = 0; at < static_cast<size_t>(n);) {
      // The kernel's records, each 8-aligned: the length and the name are
      // read where dirent64 puts them, not through a cast of the buffer.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + at + offsetof(dirent64, d_reclen), sizeof reclen);
      const char* name = buf + at + offsetof(dirent64, d_name);
      if (reclen == 0) return false;  // never from a kernel; not looped on
      at += reclen;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      if (!fn(name)) return true;
    }
  }
}

}  // namespace ltd
