// What of another user's job a caller sees (Slurm's PrivateData=jobs): its
// owner, name, state, devices, times and the kind of its root cause, as
// `ps` shows anyone's processes; not where it runs, what it was told, what
// it wrote or where it stopped. Those are the owner's, root's and the
// admin group's (--private-data no opens them to everyone).
#pragma once

#include <string_view>

#include "ltd.pb.h"

namespace ltd {

// What a human view prints in place of a hidden field.
inline constexpr std::string_view kHiddenNote = "(hidden: not your job)";

// Empties, in `view` of a job the caller does not own, the cwd, the
// arguments after the program and the client's label of the command, the
// --output and --error paths, every root cause's message, the ranks'
// error text and the names of the files they left in errors/, the last
// refused rendezvous record's words, the hang report and the unkillable
// processes' kernel stacks; lists in view->hidden each of those that had
// content.
void HideOthersDetails(v1::Job* view);

}  // namespace ltd
