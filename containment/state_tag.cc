#include "state_tag.h"

#include <climits>
#include <cstdlib>

namespace ltd {

std::string Hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<size_t>(i)] = kDigits[v & 0xf];
  return out;
}

std::string StateTag(const std::string& state_dir) {
  char resolved[PATH_MAX];
  const std::string path = realpath(state_dir.c_str(), resolved) != nullptr ? resolved : state_dir;
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: stable across builds and hosts
  for (unsigned char c : path) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Hex64(h);
}

}  // namespace ltd
