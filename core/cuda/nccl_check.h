// EMBER_NCCL_CHECK: a failed NCCL call becomes an ember::Error naming the call, its file:line,
// the result code and NCCL's own description. Header-only: NCCL is linked only by the code that
// calls it (the scheduler's communicator), not by core.
#pragma once

#include <nccl.h>

#include "core/cuda/cuda_check.h"

namespace ember::cuda::detail {
inline const char* nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(unknown)";
  }
}
}  // namespace ember::cuda::detail

#define EMBER_NCCL_CHECK(call)                                                                                   \
  do {                                                                                                           \
    const ncclResult_t ember_nccl_r_ = (call);                                                                   \
    if (ember_nccl_r_ != ncclSuccess) [[unlikely]]                                                               \
      ::ember::cuda::detail::throw_library_error("NCCL", ::ember::cuda::detail::nccl_result_name(ember_nccl_r_), \
                                                 ncclGetErrorString(ember_nccl_r_), #call, __FILE__, __LINE__);  \
  } while (0)
