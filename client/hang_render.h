// `ltctl show`'s hang report of a job: its ranks' steps, heartbeats and
// stacks; a multi-node run's node by node, with the nodes that told
// nothing.
#pragma once

#include <cstdio>
#include <string>

#include "ltd.pb.h"

namespace ltd {

// "rank(s) [1,3]", or "none" for no rank.
std::string RankList(const google::protobuf::RepeatedField<int32_t>& ranks);
// The job's hang report (it has one), after a blank line.
void PrintHangReport(const v1::Job& j, FILE* out);

}  // namespace ltd
