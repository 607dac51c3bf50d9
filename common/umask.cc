#include "umask.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>

namespace ltd {

mode_t CurrentUmask() {
  if (FILE* f = std::fopen("/proc/self/status", "re"); f != nullptr) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f) != nullptr) {
      found = std::sscanf(line, "Umask: %o", &mask) == 1;
    }
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask & 0777);
  }
  // Kernels before 4.7 have no Umask line: set it and set it back.
  const mode_t mask = umask(077);
  umask(mask);
  return mask & 0777;
}

}  // namespace ltd
