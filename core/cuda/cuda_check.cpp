#include "core/cuda/cuda_check.h"

#include "core/error.h"

namespace ember::cuda::detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // Non-sticky errors stay in the runtime's last-error slot until read; read it so the next
  // EMBER_CUDA_CHECK_LAUNCH does not blame an innocent launch.
  (void)cudaGetLastError();
  EMBER_FAIL("CUDA error at ", file, ":", line, ": ", call, " failed with ", cudaGetErrorName(err), " (",
             cudaGetErrorString(err), ")");
}

void throw_library_error(const char* library, const char* name, const char* message, const char* call, const char* file,
                         int line) {
  EMBER_FAIL(library, " error at ", file, ":", line, ": ", call, " failed with ", name, " (", message, ")");
}

}  // namespace ember::cuda::detail
