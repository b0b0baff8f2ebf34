// CUDA index_select and a deterministic index_add (core/index_kernels.h): the embedding layer's
// forward and backward, and the adjoint pair of every gather along one dim.
// index_select moves raw elements (one kernel per element width). index_add must not depend on
// thread timing, so instead of float atomics it groups the source rows by destination index with
// group_by_key (core/cuda/group_by_key.h: each group's positions in increasing order) and lets the
// thread at the head of each (destination, column) group add its rows in that order. The result
// is bit-for-bit reproducible run to run and equals the CPU's sum order.
#include <algorithm>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/group_by_key.h"
#include "core/cuda/launch.h"
#include "core/index_kernels.h"
#include "core/raw_dispatch.h"
#include "core/shape_around.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 16384;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <typename R>
__global__ void index_select_kernel(R* out, const R* src, const int64_t* idx, int64_t n, int64_t m, int64_t size,
                                    int64_t inner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t i = e % inner, j = (e / inner) % m, o = e / (inner * m);
    out[e] = src[(o * size + idx[j]) * inner + i];
  }
}

void cuda_index_select(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index) {
  const Around s = around(src.shape(), dim);
  const int64_t m = index.numel(), n = s.outer * m * s.inner;
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  auto run = [&](auto tag) {
    using R = decltype(tag);
    launch(index_select_kernel<R>, blocks_for(n), kThreads, 0, kernel_stream(), static_cast<R*>(out.raw_data()),
           static_cast<const R*>(src.raw_data()), idx, n, m, s.size, s.inner);
  };
  dispatch_raw(src.itemsize(), "index_select", run);
}

// Thread per (outer, group position k, column); only the head of each group works.
template <typename T>
__global__ void add_groups(T* out, const T* src, const int64_t* idx, const int64_t* perm, const int64_t* start,
                           int64_t outer, int64_t m, int64_t size, int64_t inner) {
  const int64_t n = outer * m * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t i = e % inner, k = (e / inner) % m, o = e / (inner * m);
    const int64_t t = idx[perm[k]];
    if (start[t] != k) continue;
    T acc = out[(o * size + t) * inner + i];
    const int64_t end = start[t + 1];
    for (int64_t q = k; q < end; ++q) acc = static_cast<T>(acc + src[(o * m + perm[q]) * inner + i]);
    out[(o * size + t) * inner + i] = acc;
  }
}

void cuda_index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const Around d = around(out.shape(), dim);
  const int64_t m = index.numel(), inner = d.inner;
  if (d.outer == 0 || m == 0 || inner == 0) return;
  DeviceGuard guard(out.device());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  const KeyGroups groups = group_by_key(idx, m, d.size, out.device());
  EMBER_DISPATCH_NUMERIC(out.dtype(), "index_add", [&] {
    using T = scalar_t;
    launch(add_groups<T>, blocks_for(d.outer * m * inner), kThreads, 0, kernel_stream(),
           static_cast<T*>(out.raw_data()), static_cast<const T*>(src.raw_data()), idx, groups.perm, groups.start,
           d.outer, m, d.size, inner);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(index_select_stub, CUDA, cuda_index_select);
EMBER_REGISTER_KERNEL(index_add_stub, CUDA, cuda_index_add);

}  // namespace ember::cuda
