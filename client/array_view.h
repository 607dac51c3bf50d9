// ltctl's side of job arrays (`submit --array`): the id `ps` shows for a
// task ("12_3") and `show` of a whole array (its tasks by state); `wait`
// of one is follow.h's WaitArray.
#pragma once

#include <cstdio>
#include <string>

#include "ltd.pb.h"

namespace ltd {

// "12_3" for an array's task, the job id for any other job.
std::string ShownId(const v1::Job& job);
// `show` of a task: the line that says whose array it is; nothing for
// another job.
void PrintArrayField(const v1::Job& job, FILE* out);
// `show` of a whole array (Show's reply with array_tasks): a summary of its
// tasks by state, then each task.
void PrintArray(const v1::Job& array, FILE* out);

}  // namespace ltd
