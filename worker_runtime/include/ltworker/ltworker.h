/* libltworker: how a rank talks to ltd.
 *
 * Every call writes one line of the heartbeat protocol (docs/protocol.md, "Heartbeats")
 * to the fd named by LT_HEARTBEAT_FD. When that variable is absent (the
 * program runs without ltd) every call is a cheap no-op that returns 0, so
 * the same binary runs anywhere. Calls are thread-safe and never block for
 * long: a write that would block is dropped, since a late heartbeat is worth
 * nothing and a rank must never stall on its watchdog.
 *
 * Return value: 0 on success or when disabled, -1 with errno set otherwise.
 */
#ifndef LTWORKER_LTWORKER_H_
#define LTWORKER_LTWORKER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when running under ltd (LT_HEARTBEAT_FD is set and valid), else 0. */
int lt_enabled(void);

/* "hb": alive, without progress information. */
int lt_heartbeat(void);

/* "hb STEP": alive, at progress counter STEP (>= 0; negative fails with
 * EINVAL). */
int lt_heartbeat_step(int64_t step);

/* The longest heartbeat timeout ltd accepts: 365 days. */
#define LT_MAX_TIMEOUT_MS INT64_C(31536000000)

/* "timeout DUR": this rank's heartbeat deadline becomes `milliseconds` from
 * now on, even if the job was submitted without --heartbeat-timeout; 0 (and
 * only 0) turns the rank's watchdog off. A timeout over LT_MAX_TIMEOUT_MS is
 * sent as LT_MAX_TIMEOUT_MS, since ltd would ignore a longer one. Negative
 * values fail with EINVAL. */
int lt_set_timeout_ms(int64_t milliseconds);

/* "error TEXT": the rank's own account of a failure; it becomes the job's
 * root-cause message if this rank turns out to be the root cause. Newlines
 * in text are replaced by spaces (see lt_report_error_n for the details).
 * A NULL text is sent as an empty one. */
int lt_report_error(const char* text);

/* Same as lt_report_error, for text that is not NUL-terminated (a C++
 * std::string_view, say). Only `length` bytes are read. Control characters
 * become spaces and bytes outside ASCII become '?', since the protocol is
 * ASCII lines; text that would make the line 4096 bytes or longer is cut and
 * ends in "...", so the line stays one atomic write. */
int lt_report_error_n(const char* text, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* LTWORKER_LTWORKER_H_ */
