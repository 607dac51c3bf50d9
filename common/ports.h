// MASTER_PORT selection: a port the kernel hands out as free right now,
// never one another running job holds. ltd's job table picks one per job;
// ltrun picks its one job's without the table.
#pragma once

#include <set>

#include "absl/status/statusor.h"

namespace ltd {

// Picks a MASTER_PORT that is free on the host and not in `in_use`.
class PortAllocator {
 public:
  virtual ~PortAllocator() = default;
  virtual absl::StatusOr<int> Pick(const std::set<int>& in_use) = 0;
};

class KernelPortAllocator final : public PortAllocator {
 public:
  absl::StatusOr<int> Pick(const std::set<int>& in_use) override;
};

}  // namespace ltd
