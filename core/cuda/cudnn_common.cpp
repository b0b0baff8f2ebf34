#include "core/cuda/cudnn_common.h"

#if EMBER_WITH_CUDNN

#include <climits>
#include <map>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_guard.h"

namespace ember::cuda {

cudnnHandle_t cudnn_handle(int device) {
  // Per thread (handles are not thread-safe); never destroyed, as cuBLAS's.
  thread_local std::map<int, cudnnHandle_t> handles;
  cudnnHandle_t& h = handles[device];
  DeviceGuard g(Device::cuda(device));
  if (!h) EMBER_CUDNN_CHECK(cudnnCreate(&h));
  EMBER_CUDNN_CHECK(cudnnSetStream(h, raw(current_stream(device))));
  return h;
}

bool cudnn_supports(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

cudnnDataType_t cudnn_dtype(DType t) {
  switch (t) {
    case DType::Float32:
      return CUDNN_DATA_FLOAT;
    case DType::Float64:
      return CUDNN_DATA_DOUBLE;
    case DType::Float16:
      return CUDNN_DATA_HALF;
    case DType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      EMBER_FAIL("cuDNN: dtype ", t, " is not supported (float32, float64, float16, bfloat16)");
  }
}

DataPtr cudnn_workspace(int device, size_t bytes) {
  if (bytes == 0) return DataPtr(nullptr, [](void*) {});
  return device_allocator(device).allocate(bytes);
}

void set_nchw(cudnnTensorDescriptor_t d, DType t, int64_t n, int64_t c, int64_t h, int64_t w) {
  for (int64_t v : {n, c, h, w})
    EMBER_CHECK(v > 0 && v <= INT_MAX, "cuDNN: tensor dimension ", v, " outside cuDNN's range");
  EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, cudnn_dtype(t), static_cast<int>(n),
                                               static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
