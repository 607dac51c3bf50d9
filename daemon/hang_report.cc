#include "hang_report.h"

#include <algorithm>
#include <array>

namespace ltd {

bool WaitsInCollective(std::string_view stack) {
  // Frames of a rank waiting for its peers. In Python, DDP's gradient
  // allreduce runs inside backward(), so autograd's frames count too.
  static constexpr std::array<std::string_view, 14> kMarkers = {"c10d::Work::wait",
                                                                "WorkNCCL::wait",
                                                                "WorkNCCL::synchronize",
                                                                "UnboundBuffer::waitRecv",
                                                                "UnboundBuffer::waitSend",
                                                                "cudaStreamSynchronize",
                                                                "cudaDeviceSynchronize",
                                                                "ncclCommGetAsyncError",
                                                                "distributed_c10d.py",
                                                                "nn/parallel/distributed.py",
                                                                "torch/autograd/",
                                                                "in all_reduce",
                                                                "in barrier",
                                                                "in wait"};
  return std::any_of(kMarkers.begin(), kMarkers.end(),
                     [&](std::string_view m) { return stack.find(m) != std::string_view::npos; });
}

bool IsStraggler(int64_t step, int64_t max_step) {
  if (max_step < 0) return false;
  const int64_t lag = max_step - std::max<int64_t>(step, -1);
  return lag > 2 && lag * 10 > max_step;
}

int AttributeHang(HangReport& report) {
  // Only meaningful when the ranks that missed their deadline wait in a
  // collective: then they wait for a peer, and the peers whose stacks show
  // no collective are the ones that stopped, whatever their deadlines said.
  bool stalled_wait = false;
  std::vector<int> culprits;
  for (HangReportRank& r : report.ranks) {
    r.in_collective = !r.stack.empty() && WaitsInCollective(r.stack);
    if (r.stalled && r.in_collective) stalled_wait = true;
    if (!r.stack.empty() && !r.in_collective) culprits.push_back(r.rank);
  }
  if (!stalled_wait || culprits.empty()) return -1;
  for (HangReportRank& r : report.ranks) {
    r.stalled = std::find(culprits.begin(), culprits.end(), r.rank) != culprits.end();
  }
  report.stalled_ranks = culprits;
  return culprits.front();
}

}  // namespace ltd
