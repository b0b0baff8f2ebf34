// A strided element copy between two CUDA tensors of the same dtype, shape and device (either may
// be any view; src may be an expanded view with zero strides), queued on the current stream
// (core/cuda/launch.h's kernel_stream()). Raw bits move, so NaN payloads and -0 survive.
#pragma once

#include "core/tensor.h"

namespace ember::cuda {

void copy_same_dtype_on_device(const Tensor& dst, const Tensor& src);

}  // namespace ember::cuda
