// What ltrun says on stderr when its job did not succeed: the state, the
// root cause with its node, and the hang report; a multi-node run's node
// by node (every node's ranks, the ones that told nothing, the stalled
// ranks' stacks). `--report FILE` has the whole record.
#pragma once

#include "job.h"

namespace ltd {

void PrintEnd(const Job& job);

}  // namespace ltd
