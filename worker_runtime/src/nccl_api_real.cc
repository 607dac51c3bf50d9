#include "nccl_api_real.h"

#include <nccl.h>

namespace ltworker::internal {
namespace {

static_assert(kNcclSuccess == ncclSuccess);
static_assert(kNcclInProgress == ncclInProgress);

ncclComm_t ToComm(CommHandle comm) { return static_cast<ncclComm_t>(comm); }

class RealApi final : public NcclApi {
 public:
  int GetAsyncError(CommHandle comm, int* async_error) override {
    ncclResult_t error = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(ToComm(comm), &error);
    *async_error = error;
    return rc;
  }
  int Abort(CommHandle comm) override { return ncclCommAbort(ToComm(comm)); }
  const char* ErrorString(int result) override {
    const char* text = ncclGetErrorString(static_cast<ncclResult_t>(result));
    return text != nullptr ? text : "unknown NCCL error";
  }
};

}  // namespace

NcclApi* RealNcclApi() {
  static RealApi* const api = new RealApi;  // leaked: the watcher may outlive static destructors
  return api;
}

}  // namespace ltworker::internal
