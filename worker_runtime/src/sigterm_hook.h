// The process-wide SIGTERM handler that lets the NCCL watcher abort
// communicators before the rank goes down.
//
// The handler is as small as a handler must be: it tells the watcher
// (NcclWatcher::NotifySigterm, async-signal-safe) and chains to whatever was
// installed before us, so the program's own handler (Python's, say) still
// runs. When the previous disposition was SIG_DFL the rank must still die of
// SIGTERM, but only after its communicators are aborted, so the watcher
// thread calls FinishSigterm() once it is done. A second SIGTERM while that
// is under way kills the rank at once.
//
// A program that ignores SIGTERM (SIG_IGN) keeps its communicators: the
// hook is not installed. A handler installed after ours replaces it, so
// register communicators after the program set up its signal handling.
#ifndef LTWORKER_SRC_SIGTERM_HOOK_H_
#define LTWORKER_SRC_SIGTERM_HOOK_H_

namespace ltworker::internal {

class NcclWatcher;

// Installs the handler, forwarding to `watcher`. Returns 0 (also when
// SIGTERM is ignored and nothing was installed), EALREADY if installed, or
// sigaction's errno.
int InstallSigtermHook(NcclWatcher* watcher);

// Puts back the disposition found at install time. For tests and for
// tearing the watcher down; returns 0 or an errno value.
int UninstallSigtermHook();

// On the watcher thread, after a SIGTERM's aborts: if the disposition before
// ours was SIG_DFL, restores it and raises SIGTERM, so the process ends as
// it would have without us. Otherwise does nothing (the previous handler has
// already run).
void FinishSigterm();

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_SIGTERM_HOOK_H_
