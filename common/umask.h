// The umask a client submits with: the files ltd creates for the job as its
// user (--output, --error) get it, as a shell's `>` would, whatever the
// umask of the supervisor that starts the helper creating them (lt-shim's
// is 077).
#pragma once

#include <sys/types.h>

namespace ltd {

// A job of a client or record that does not say (a release before): its
// files were private.
inline constexpr mode_t kDefaultJobUmask = 077;

// This process's umask, read without changing it (/proc/self/status's
// Umask line; umask() set and set back where /proc cannot say).
mode_t CurrentUmask();

}  // namespace ltd
