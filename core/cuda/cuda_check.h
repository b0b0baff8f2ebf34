// Checked CUDA runtime calls. Every call into the CUDA runtime goes through EMBER_CUDA_CHECK, which
// turns a failure into an ember::Error naming the call, its file:line and CUDA's own description,
// and clears the runtime's last-error slot so that a later, unrelated check does not report it
// again. EMBER_CUDA_CHECK_LAUNCH() follows every kernel launch (launch errors are only reported
// through cudaGetLastError). The vendor libraries have their own macros built on
// throw_library_error: EMBER_CUBLAS_CHECK (core/cuda/cublas_api.h), EMBER_CUDNN_CHECK
// (core/cuda/cudnn_check.h) and EMBER_NCCL_CHECK (core/cuda/nccl_check.h).
#pragma once

#include <cuda_runtime_api.h>

namespace ember::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
// "<library> error at <file>:<line>: <call> failed with <name> (<message>)".
[[noreturn]] void throw_library_error(const char* library, const char* name, const char* message, const char* call,
                                      const char* file, int line);
}  // namespace ember::cuda::detail

#define EMBER_CUDA_CHECK(call)                                                             \
  do {                                                                                     \
    const cudaError_t ember_cuda_err_ = (call);                                            \
    if (ember_cuda_err_ != cudaSuccess) [[unlikely]]                                       \
      ::ember::cuda::detail::throw_cuda_error(ember_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define EMBER_CUDA_CHECK_LAUNCH() EMBER_CUDA_CHECK(cudaGetLastError())
