// MASTER_PORT selection: a port the kernel hands out as free right now,
// never one another running job holds.
#pragma once

#include "job_manager.h"

namespace ltd {

class KernelPortAllocator final : public PortAllocator {
 public:
  absl::StatusOr<int> Pick(const std::set<int>& in_use) override;
};

}  // namespace ltd
