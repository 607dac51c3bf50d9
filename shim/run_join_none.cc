#include "run_join.h"

namespace ltd {

bool CanJoinRuns() { return false; }
void SetUpJoiningProcess() {}
std::unique_ptr<RunJoin> MakeRunJoin(Loop&) { return nullptr; }

}  // namespace ltd
