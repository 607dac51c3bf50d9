/* A rank written in C against libltworker: beats steps, widens its
 * timeout, reports an error and fails, as a real rank would. */
#include <ltworker/ltworker.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
  if (!lt_enabled()) {
    fprintf(stderr, "c_rank: not under ltd\n");
    return 10;
  }
  for (int64_t step = 0; step < 5; ++step) {
    if (lt_heartbeat_step(step) != 0) return 11;
    usleep(10000);
  }
  lt_set_timeout_ms(60000);
  lt_report_error("c_rank: loss is NaN at step 4");
  return 2;
}
