// A group of a tensor's dims, coalesced where neighbours are contiguous with each other, with the
// map from a row-major index over the group to an element offset. Kernels that walk rows of a
// strided tensor (the reductions, the sort) take one by value as a launch parameter.
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/tensor.h"

namespace ember::cuda {

template <int kMax>
struct StridedDims {
  int n = 0;
  int64_t size[kMax];
  int64_t stride[kMax];

  EMBER_DEVICE int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; --d) {
      off += (i % size[d]) * stride[d];
      i /= size[d];
    }
    return off;
  }
};

// Dims [begin, end) of t except `skip` (-1: none), size-1 dims dropped and neighbours merged.
// False when they do not fit in kMax groups (*out is then unspecified).
template <int kMax>
bool coalesce_dims(const Tensor& t, int64_t begin, int64_t end, int64_t skip, StridedDims<kMax>* out) {
  StridedDims<kMax> g;
  for (int64_t d = begin; d < end; ++d) {
    const int64_t size = t.size(d), stride = t.stride(d);
    if (d == skip || size == 1) continue;
    if (g.n > 0 && g.stride[g.n - 1] == stride * size) {
      g.size[g.n - 1] *= size;
      g.stride[g.n - 1] = stride;
      continue;
    }
    if (g.n == kMax) return false;
    g.size[g.n] = size;
    g.stride[g.n] = stride;
    ++g.n;
  }
  *out = g;
  return true;
}

}  // namespace ember::cuda
