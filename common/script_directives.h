// `#LTD OPTION...` lines at the top of a job's script, as sbatch's
// `#SBATCH` lines: `ltctl submit` takes them as submit options, the
// command line's winning. They are read from the script's first lines:
// after its `#!` line, blank lines and comments, up to the first line of
// the script's own (sbatch stops there too).
//
// The script's bytes are its author's: one pure parser turns them into
// tokens, or one line saying what is wrong and where (a fuzzer calls it
// alone).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

struct ScriptDirective {
  int line = 0;                     // 1-based, for messages
  std::vector<std::string> tokens;  // "--devices", "4", "--name=x", ...
};

// The most of a script read for its directives, and the most tokens.
inline constexpr size_t kMaxScriptHead = 64 * 1024;
inline constexpr size_t kMaxDirectiveTokens = 256;

// The directives of `text` (a script's first bytes; one without a `#!`
// line has none). A token is split at blanks; '...' and "..." keep blanks
// in one (no escapes, no expansion). `where` names the script in messages.
absl::StatusOr<std::vector<ScriptDirective>> ParseScriptDirectives(std::string_view text,
                                                                   std::string_view where);

}  // namespace ltd
