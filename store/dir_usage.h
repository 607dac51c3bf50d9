// What a directory takes on disk (allocated blocks, as `du`), for the
// state dir's bound (--max-state-bytes).
#pragma once

#include <cstdint>
#include <string>

namespace ltd {

// Bytes allocated to the files under `dir` (two levels down at most, links
// not followed, at most a few thousand entries looked at: a job's dir has
// a handful), on its own mount alone: a mount in it (errors/'s tmpfs, or
// a file system a user mounted there) is neither counted nor entered, and
// nothing is asked of it. 0 when it cannot be read.
uint64_t DirBytes(const std::string& dir);

}  // namespace ltd
