#include <ember/config.h>
#if EMBER_WITH_CUDNN
#include "core/cuda/cudnn_check.h"

namespace ember::cuda::detail {

// cuDNN 9 has sub-codes (e.g. CUDNN_STATUS_BAD_PARAM_NULL_POINTER = 2002); the hundreds give the
// category, which is what the name says; cudnnGetErrorString gives the detail.
const char* cudnn_status_name(cudnnStatus_t s) {
  switch (static_cast<int>(s) / 1000) {
    case 0:
      return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_UNKNOWN";
    case 1:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2:
      return "CUDNN_STATUS_BAD_PARAM";
    case 3:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case 4:
      return "CUDNN_STATUS_INTERNAL_ERROR";
    case 5:
      return "CUDNN_STATUS_EXECUTION_FAILED";
    default:
      return "CUDNN_STATUS_UNKNOWN";
  }
}

}  // namespace ember::cuda::detail
#endif  // EMBER_WITH_CUDNN
