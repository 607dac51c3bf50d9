#include "containment_factory.h"

#include "process_group_containment.h"

namespace ltd {

absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore&) {
  (void)mode;
  return std::make_unique<ProcessGroupContainment>(loop);
}

}  // namespace ltd
