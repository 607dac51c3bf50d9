#include "stored_lines.h"

#include "absl/strings/numbers.h"
#include "bytes.h"
#include "job_log.h"
#include "str_util.h"

namespace ltd {
namespace {

// What the log says in a line of its own ("[ltd] ..."), told to the client
// as a notice. Its cut marker says where the job's log dropped lines at
// its budget: the client lost them there, and only there.
std::string Notice(std::string_view text) {
  if (const std::string cut = CutOfMarker(text); !cut.empty()) {
    return Cat("ltd: the job's log dropped ", cut,
               " of output here at its budget (--job-max-log-bytes); its head and tail are kept");
  }
  return Cat("ltd: ", DisplayEscape(text, Controls::kEscape));
}

}  // namespace

void StoredLinesToEvents(std::string_view chunk, uint64_t end, uint64_t log_id, bool batched,
                         std::vector<v1::JobEvent>* events) {
  v1::OutputLines* run = nullptr;  // the batch lines go to now
  for (size_t at = 0; at < chunk.size();) {
    size_t nl = chunk.find('\n', at);
    if (nl == std::string_view::npos) nl = chunk.size();
    std::string_view line = chunk.substr(at, nl - at);
    at = nl + 1;
    const uint64_t position = end - (chunk.size() - std::min(at, chunk.size()));
    const bool err = StoredStderr(line);
    if (!StampOf(line).empty()) line.remove_prefix(kLogStampBytes);
    int rank = -1;
    const size_t close = line.find("] ");
    const bool output = line.starts_with('[') && close != std::string_view::npos &&
                        absl::SimpleAtoi(absl::string_view(line.data() + 1, close - 1), &rank) &&
                        rank >= 0;
    v1::JobEvent* ev = nullptr;
    if (output && run != nullptr) {
      ev = &events->back();
    } else {
      ev = &events->emplace_back();
      if (log_id != 0) ev->mutable_at()->set_log_id(std::exchange(log_id, 0));
      run = output && batched ? ev->mutable_lines() : nullptr;
    }
    ev->mutable_at()->set_offset(position);
    if (output) {
      v1::OutputLine* out = run != nullptr ? run->add_lines() : ev->mutable_output();
      out->set_rank(rank);
      out->set_stderr(err);
      out->set_data(std::string(line.substr(close + 2)));
    } else if (line.starts_with("[ltd] ")) {
      ev->set_notice(Notice(line.substr(6)));
    } else {
      // Not a line ltd wrote this way (a log damaged on disk): as it is, escaped.
      ev->set_notice(Cat("ltd: a line of the log reads: ", DisplayEscape(line, Controls::kEscape)));
    }
  }
}

}  // namespace ltd
