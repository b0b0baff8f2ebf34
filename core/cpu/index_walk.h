// Iteration helper shared by the CPU indexing and sorting kernels: visits every fiber of a shape
// along one dim (every position of the other dims), in parallel, handing the callback each
// operand's element offset of the fiber's first element. Operands may have different sizes along
// the fiber dim (gather's index vs its source, topk's k vs n) but agree on the other dims' positions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/cpu/capability.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

template <size_t N, typename F>
void for_each_fiber(const Shape& shape, int64_t dim, const std::array<const Shape*, N>& strides, int64_t grain,
                    const F& f) {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> st;
  int64_t total = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d == dim) continue;
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    sizes.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) st[k].push_back((*strides[k])[d]);
    total *= shape[d];
  }
  const int64_t nd = static_cast<int64_t>(sizes.size());
  parallel_for(0, total, std::max<int64_t>(grain, 1), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * st[k][d];
    }
    for (int64_t p = begin; p < end; ++p) {
      f(off);
      for (int64_t d = nd - 1; d >= 0; --d) {
        if (++idx[d] < sizes[d]) {
          for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
          break;
        }
        for (size_t k = 0; k < N; ++k) off[k] -= (sizes[d] - 1) * st[k][d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
