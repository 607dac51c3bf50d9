// A byte budget that grows at `rate` a second up to a second's worth, as
// the readers of a rank's fds pace them (control_reader.h, read_pacer.h):
// spent by what is read, and grown back by the time since.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ltd {

struct TokenBucket {
  double rate = 0;   // bytes a second
  double bytes = 0;  // may be read now (below 0 after a read past it)
  uint64_t at_ms = 0;

  // A second's worth at once, from `now_ms`.
  static TokenBucket Full(double rate, uint64_t now_ms) { return {rate, rate, now_ms}; }

  // What has grown back by `now_ms`; a budget raised past a second's
  // worth (a rank's last words) is left as it is.
  void Grow(uint64_t now_ms) {
    if (now_ms > at_ms && bytes < rate) {
      bytes = std::min(rate, bytes + static_cast<double>(now_ms - at_ms) * rate / 1000);
    }
    at_ms = std::max(at_ms, now_ms);
  }
};

}  // namespace ltd
