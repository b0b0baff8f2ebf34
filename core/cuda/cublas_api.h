// cuBLAS, loaded on first use. Linking libcublas costs every process about 0.4 s at start-up
// (measured here: 0.39-0.46 s against 0.00 s for an empty program), and every test case is a
// process, so core opens it with dlopen when the first cuBLAS GEMM runs and resolves the few
// entry points it calls. EMBER_CUBLAS_CHECK reports a failed call with its file:line, the status
// name and cuBLAS's own message.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "core/cuda/cuda_check.h"

namespace ember::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasDgemmStridedBatched) dgemm_strided_batched = nullptr;
  // bfloat16 operands, float32 accumulation (spelled out: the header overloads both names in C++).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Loads the library once; an ember::Error naming the library file and dlerror() when it cannot.
const CublasApi& cublas_api();
// Whether cublas_api() succeeds, without throwing; `why` (optional) gets the reason when not.
bool cublas_available(std::string* why = nullptr);
// The handle for `device`, bound to `stream` (one handle per device and thread: cuBLAS handles
// are not thread-safe).
cublasHandle_t cublas_handle(int device, cudaStream_t stream);

namespace detail {
const char* cublas_status_name(cublasStatus_t s);
const char* cublas_status_message(cublasStatus_t s);
}  // namespace detail

}  // namespace ember::cuda

#define EMBER_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                                \
    const cublasStatus_t ember_cublas_st_ = (call);                                                   \
    if (ember_cublas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                       \
      ::ember::cuda::detail::throw_library_error(                                                     \
          "cuBLAS", ::ember::cuda::detail::cublas_status_name(ember_cublas_st_),                      \
          ::ember::cuda::detail::cublas_status_message(ember_cublas_st_), #call, __FILE__, __LINE__); \
  } while (0)
