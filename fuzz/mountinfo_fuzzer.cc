// /proc/self/mountinfo lines (common/mountinfo.h): the kernel writes them,
// but a user names mount points and sources (a FUSE server's fsname, a
// dir of theirs), and errors/'s close decides by them whose a mount is.
// Input: the id to find on the first line, the mountinfo text after it.
// Invariants: a mount found has that id and comes from a line that starts
// with it; its fields are no longer than the text; an entry written as
// the kernel would write it (escaped) is found again the same.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "mountinfo.h"

using namespace ltd;

namespace {

// As the kernel escapes a field: space, tab, newline and backslash as \ooo.
std::string Escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      const auto u = static_cast<unsigned char>(c);
      out += '\\';
      out += static_cast<char>('0' + (u >> 6));
      out += static_cast<char>('0' + ((u >> 3) & 7));
      out += static_cast<char>('0' + (u & 7));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string::npos || newline == 0 || newline > 18) return 0;
  int64_t id = 0;
  for (size_t i = 0; i < newline; ++i) {
    if (input[i] < '0' || input[i] > '9') return 0;
    id = id * 10 + (input[i] - '0');
  }
  const std::string text = input.substr(newline + 1);
  const std::optional<MountEntry> e = FindMount(text, id);
  if (!e) return 0;
  FUZZ_CHECK(e->id == id && e->parent >= 0);
  const std::string start = std::to_string(id) + " ";
  FUZZ_CHECK(text.starts_with(start) || text.find("\n" + start) != std::string::npos);
  FUZZ_CHECK(!e->mount_point.empty() && e->mount_point.size() <= text.size());
  FUZZ_CHECK(!e->fs_type.empty() && e->fs_type.size() <= text.size());
  FUZZ_CHECK(!e->source.empty() && e->source.size() <= text.size());

  const std::string line = std::to_string(e->id) + " " + std::to_string(e->parent) + " 0:1 / " +
                           Escape(e->mount_point) + " rw shared:1 - " + Escape(e->fs_type) + " " +
                           Escape(e->source) + " rw\n";
  const std::optional<MountEntry> again = FindMount("1 0 0:2 / / rw - ext4 /dev/x rw\n" + line, id);
  FUZZ_CHECK(again.has_value());
  if (id != 1) {
    FUZZ_CHECK(again->parent == e->parent && again->mount_point == e->mount_point &&
               again->fs_type == e->fs_type && again->source == e->source);
  }
  return 0;
}
