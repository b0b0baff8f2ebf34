// Same-device copy with dtype conversion on a CUDA device (all eight dtypes, float16 and bfloat16
// included, with core/copy.h's conversion rules). For the backend's copy kernel: cross-device
// transfers move bytes, and a conversion between dtypes on the device happens here.
#pragma once

#include "core/tensor.h"

namespace ember::cuda {

// dst and src are on the same CUDA device and have the same shape (src may be a broadcast view;
// dst any strides, not overlapping src).
void cast_copy(const Tensor& dst, const Tensor& src);

}  // namespace ember::cuda
