// EMBER_CUDNN_CHECK: a failed cuDNN call becomes an ember::Error naming the call, its file:line,
// the status and cuDNN's own description of it.
#pragma once

#include <cudnn.h>

#include "core/cuda/cuda_check.h"

namespace ember::cuda::detail {
const char* cudnn_status_name(cudnnStatus_t s);
}  // namespace ember::cuda::detail

#define EMBER_CUDNN_CHECK(call)                                                                                      \
  do {                                                                                                               \
    const cudnnStatus_t ember_cudnn_st_ = (call);                                                                    \
    if (ember_cudnn_st_ != CUDNN_STATUS_SUCCESS) [[unlikely]]                                                        \
      ::ember::cuda::detail::throw_library_error("cuDNN", ::ember::cuda::detail::cudnn_status_name(ember_cudnn_st_), \
                                                 cudnnGetErrorString(ember_cudnn_st_), #call, __FILE__, __LINE__);   \
  } while (0)
