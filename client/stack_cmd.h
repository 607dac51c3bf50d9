// `ltctl stack JOB [--rank R] [--json]`: where each rank of a running job
// is now (proto/ltd.proto's Stack), printed rank by rank.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "connection.h"

namespace ltd {

int StackCommand(const Globals& g, const std::string& job, std::optional<int> rank);
// The reply as `ltctl stack` prints it.
void PrintStacks(const v1::StackReply& reply, FILE* out);

}  // namespace ltd
