/* libltworker_nccl: NCCL failures and teardown for ranks that use NCCL
 * directly (C/C++ programs; PyTorch has its own watchdog).
 *
 * After lt_nccl_register(comm), a watcher thread asks the communicator for
 * its asynchronous error every poll interval (100 ms by default, or
 * LT_NCCL_POLL_MS). On an error it reports
 *   "error NCCL async error on communicator: <ncclGetErrorString>"
 * to ltd (see ltworker.h; a no-op without ltd) and calls ncclCommAbort, so a
 * collective blocked on the dead peer returns and the rank can fail fast.
 *
 * The first registration also installs a SIGTERM handler. On SIGTERM (ltd's
 * teardown) the watcher thread aborts every registered communicator, so a
 * rank blocked in a collective can exit within the grace period; the
 * handler then chains to the handler installed before it, or, if that was
 * the default action, the process dies of SIGTERM once the aborts are done.
 * A program that ignores SIGTERM gets no handler. A handler installed later
 * (signal(), Python's signal.signal) replaces ours, so register after the
 * program's own signal setup.
 *
 * An aborted communicator is freed by NCCL: do not use it, do not
 * ncclCommDestroy it, but do unregister it.
 *
 * All functions are thread-safe and return 0, or -1 with errno set.
 */
#ifndef LTWORKER_NCCL_WATCH_H_
#define LTWORKER_NCCL_WATCH_H_

#include <nccl.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts watching `comm`. EINVAL for NULL, EEXIST if already registered;
 * starting the watcher thread can fail with its own errno (EAGAIN). */
int lt_nccl_register(ncclComm_t comm);

/* Stops watching `comm` (ENOENT if it was not registered). When this
 * returns the watcher no longer touches `comm`, so it may be destroyed. */
int lt_nccl_unregister(ncclComm_t comm);

/* How often communicators are polled, in milliseconds (>= 1, else EINVAL).
 * Takes effect at once, also before the first registration. */
int lt_nccl_set_poll_interval_ms(int64_t milliseconds);

#ifdef __cplusplus
}
#endif

#endif /* LTWORKER_NCCL_WATCH_H_ */
