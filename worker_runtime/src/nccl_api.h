// The seam between the NCCL watcher's logic and libnccl.
//
// NcclWatcher only needs three NCCL calls. Putting them behind this
// interface keeps the watcher free of nccl.h, so it builds and is tested
// with a fake on machines without CUDA; nccl_api_real.cc is the adapter
// that calls libnccl.
#ifndef LTWORKER_SRC_NCCL_API_H_
#define LTWORKER_SRC_NCCL_API_H_

namespace ltworker::internal {

// A communicator as the watcher sees it: ncclComm_t converted to void*.
using CommHandle = void*;

// ncclResult_t values the watcher interprets (nccl_api_real.cc checks
// them against nccl.h at compile time).
inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclInProgress = 7;  // a non-blocking op still running; not an error

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // ncclCommGetAsyncError: returns the call's own ncclResult_t and stores the
  // communicator's pending asynchronous error in *async_error. NCCL allows
  // this from any thread while others run collectives on `comm`.
  virtual int GetAsyncError(CommHandle comm, int* async_error) = 0;

  // ncclCommAbort: frees `comm` and makes operations blocked on it return.
  virtual int Abort(CommHandle comm) = 0;

  // ncclGetErrorString; never null.
  virtual const char* ErrorString(int result) = 0;
};

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_NCCL_API_H_
