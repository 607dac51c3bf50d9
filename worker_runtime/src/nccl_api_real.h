// The NcclApi that calls libnccl.
#ifndef LTWORKER_SRC_NCCL_API_REAL_H_
#define LTWORKER_SRC_NCCL_API_REAL_H_

#include "nccl_api.h"

namespace ltworker::internal {

// A process-wide stateless instance; never destroyed.
NcclApi* RealNcclApi();

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_NCCL_API_REAL_H_
