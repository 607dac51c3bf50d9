// What the stack tools print of a rank (gdb, eu-stack: frame and thread
// names are the rank's program's, its user's), /proc's stat text (a
// thread's comm is the user's), and the hang report's reading of stacks
// (model/hang_report.h), which names the rank to blame and the collective
// ranks wait in. Invariants: the layouts keep only lines that were there
// and are stable once made; the verdict names a rank of the report whose
// stack is evidence, or none; what it says stays within a bound of what
// it read.
#include <algorithm>

#include "fuzz_check.h"
#include "hang_report.h"
#include "stack_text.h"
#include "str_util.h"

using namespace ltd;

namespace {

// Every line of `out` is a line of `in`, or a header made from one.
bool LinesFrom(std::string_view out, std::string_view in) {
  for (std::string_view line : Split(out, '\n')) {
    if (line.empty()) continue;
    if (in.find(line) == std::string_view::npos && !line.starts_with("Thread ")) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t flags = in.Byte();
  const pid_t pid = static_cast<pid_t>(in.Number<uint16_t>());
  const std::string_view text = in.Rest();

  const std::string gdb = GdbFrames(text);
  FUZZ_CHECK(gdb.size() <= text.size() + 1 + std::count(text.begin(), text.end(), '\n'));
  FUZZ_CHECK(LinesFrom(gdb, text));
  FUZZ_CHECK(GdbFrames(gdb) == gdb);

  const std::string eu = EuStackFrames(text, pid);
  FUZZ_CHECK(eu.empty() || eu.find("\n#") != std::string::npos);
  FUZZ_CHECK(eu.size() <= 2 * text.size() + 32 * (1 + std::count(text.begin(), text.end(), '\n')));

  (void)ThreadState(text);

  // A report of ranks whose stacks are the input's pieces.
  HangReport report;
  int rank = 0;
  for (std::string_view stack : Split(text, '\0')) {
    HangReportRank r;
    r.rank = rank++;
    r.stalled = (flags >> (r.rank % 8)) & 1;
    r.stack = (flags & 1) ? GdbFrames(stack) : std::string(stack);
    r.stack_status = r.stack.empty() ? StackStatus::kFailed : StackStatus::kTaken;
    report.ranks.push_back(std::move(r));
    if (rank == 64) break;
  }
  const int blamed = AttributeHang(report, flags & 2);
  FUZZ_CHECK(blamed == -1 || (blamed >= 0 && blamed < rank));
  // Only a stack that shows where its rank is blames it.
  FUZZ_CHECK(blamed == -1 || StackIsEvidence(report.ranks[static_cast<size_t>(blamed)]));
  const std::string waits = DescribeCollectiveWaits(report);
  FUZZ_CHECK(waits.size() <= 64 + rank * 256 + text.size());
  const std::string missing = MissingStacks(report, std::chrono::seconds(5));
  FUZZ_CHECK(missing.size() <= 256 + rank * 16 + text.size());
  const std::string auto_stack = AutoStackText(text);
  FUZZ_CHECK(auto_stack.size() <= 128 + 3 * text.size());
  (void)WaitsInCollective(auto_stack);
  return 0;
}
