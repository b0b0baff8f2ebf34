// A strided element copy between two CUDA tensors of the same dtype, shape and device (either may
// be any view; src may be an expanded view with zero strides), queued on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace ember::cuda {

void copy_same_dtype_on_device(const Tensor& dst, const Tensor& src, cudaStream_t stream);

}  // namespace ember::cuda
