// A job record's id and state, read without the rest of it: a restart's
// first look at which jobs were live (store/job_store.cc's States), before
// the whole table is read. The bytes are the state dir's: any may come.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "job.h"

namespace ltd {

// The record's top-level "id" and "state", when both are strings and the
// state is one of JobState's words; nullopt otherwise. Whenever
// JobFromJson reads a job from the same bytes, this gives its id and state.
std::optional<std::pair<std::string, JobState>> RecordIdAndState(std::string_view text);

}  // namespace ltd
