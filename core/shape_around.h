// A contiguous shape seen as [outer, size, inner] around one dim: the layout index_select,
// index_add and their CUDA kernels iterate over (outer rows of `size` slices of `inner` elements).
// Plain C++, so the CPU kernels, the CUDA kernels and their emulation build share it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ember {

struct Around {
  int64_t outer = 1, size = 1, inner = 1;
};

inline Around around(const Shape& s, int64_t dim) {
  Around r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < dim) r.outer *= s[d];
    if (d == dim) r.size = s[d];
    if (d > dim) r.inner *= s[d];
  }
  return r;
}

}  // namespace ember
