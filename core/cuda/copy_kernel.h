// A strided element copy between two CUDA tensors of the same dtype, shape and device (either may
// be any view; src may be an expanded view with zero strides), queued on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace ember::cuda {

void copy_same_dtype_on_device(const Tensor& dst, const Tensor& src, cudaStream_t stream);
// dst = src converted to dst's dtype (same shape and device; either a strided view), queued on
// `stream`. Returns false, launching nothing, when either dtype is float16 or bfloat16.
bool cast_on_device(const Tensor& dst, const Tensor& src, cudaStream_t stream);

}  // namespace ember::cuda
