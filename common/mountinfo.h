// /proc/PID/mountinfo, read: the kernel writes it, but the mount points
// and sources in it are names a user chose (a FUSE server's fsname, a dir
// of theirs), so every field is taken as hostile bytes.
#pragma once

#include <sys/stat.h>

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ltd {

// The non-empty parts of `s` between `sep`s (mountinfo's fields, a
// controller list), as views into `s`; not of a temporary string (see
// Split).
std::vector<std::string_view> NonEmptyFields(std::string_view s, char sep);
template <typename S>
requires std::same_as<S, std::string>
void NonEmptyFields(S&&, char) = delete;

// A path as /proc/PID/mountinfo writes it, with space, tab, newline and
// backslash as \ooo, as it is.
std::string UnescapeMountinfo(std::string_view s);

// The id of the mount that `name` in `dir` is on (`dir`'s own for ""),
// as mountinfo numbers it, a link not followed. Nothing is asked of the
// file system: no field is requested and none synced, so a FUSE server is
// not reached (and a root caller without allow_other not refused, as it
// is for any field). nullopt where the kernel cannot tell (before 5.8).
std::optional<int64_t> MountIdAt(int dir, const char* name);

// The dir `name` in `dir` opened for reading (an fd the caller closes), only
// if it is on `mount` (any mount for nullopt); -1 otherwise. A file system
// mounted there since `name` was looked at is not entered: an O_PATH open
// and its mount's id ask it nothing, and "." from that fd stays on the dir
// itself.
int OpenDirOnMount(int dir, const char* name, std::optional<int64_t> mount);

// Whether a statx answer says its entry is on `mount` (any mount for
// nullopt; an answer that names none is on none).
bool OnMount(const struct statx& sx, std::optional<int64_t> mount);

// Mounts stacked on one entry that root detaches before it leaves the
// entry as it is: more than fusermount3 lets users mount on the whole
// host by default (mount_max = 1000 in /etc/fuse.conf).
inline constexpr int kMaxStackedMounts = 1024;

// One line of mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] -
// TYPE SOURCE SUPER_OPTIONS".
struct MountEntry {
  int64_t id = -1;
  int64_t parent = -1;
  std::string mount_point;  // unescaped
  std::string fs_type;      // "tmpfs", "fuse.sshfs"
  std::string source;       // unescaped; "none" when the kernel has none
};

// The line of mount `id` in mountinfo text; nullopt when there is none or
// it is not a well-formed line.
std::optional<MountEntry> FindMount(std::string_view mountinfo, int64_t id);

}  // namespace ltd
