// CUDA gather and scatter / scatter_add (core/index_kernels.h): the index ops behind the losses
// (gather picks each sample's target value, its backward is scatter_add into zeros) and the
// ScatterBackward of scatter.
//
// gather: one thread per output element; the source offset is the index tensor's position with
// the gathered coordinate replaced by the index value (an offset calculator over the index's shape
// with the source's stride along dim zeroed, plus index * that stride). Elements move as raw bits.
//
// scatter: position i of the index writes (or adds) src[i] into out at index[i] along dim, and
// repeated indices must resolve in index order, bit for bit like the CPU (the last write wins; a
// sum adds in index order). Two positions can only collide when they share every coordinate but
// dim, i.e. lie on one fiber along dim, so fibers never interfere and the order only matters
// inside a fiber. No float atomics; two deterministic paths:
//   - by fiber (short fibers, enough fibers to fill the device, or few indices into a large
//     out): one thread walks a fiber in index order, exactly the CPU's loop;
//   - by group (few long fibers, such as a 1-D scatter_add): each position gets the key
//     fiber * out.size(dim) + index, group_by_key (core/cuda/group_by_key.h) lists each key's
//     positions in increasing order, and one thread per key applies them in that order (the sum
//     in index order, or the last position's value).
#include <array>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/group_by_key.h"
#include "core/cuda/launch.h"
#include "core/index_kernels.h"
#include "core/raw_dispatch.h"

namespace ember::cuda {
namespace {

// The by-fiber path is taken when fibers are at most kShortFiber long, or when there are at
// least kManyFibers of them (then a thread per fiber keeps the device busy and needs no scratch),
// or when out has more than kKeysPerPosition keys (positions along dim, over all fibers) per index
// position: the by-group path's scratch is 16 bytes per key, too much for a few indices into a
// large tensor.
constexpr int64_t kShortFiber = 16;
constexpr int64_t kManyFibers = 16384;
constexpr int64_t kKeysPerPosition = 8;

// An offset calculator over `shape` for operands with the given strides (the views only carry
// the strides to make_offset_calc; no data is read through them).
template <int N>
OffsetCalc<N> offsets_over(const Shape& shape, const std::array<const Tensor*, N>& ts,
                           const std::array<Shape, N>& strides) {
  std::array<Tensor, N> views;
  const Tensor* ptrs[N];
  for (int k = 0; k < N; ++k) {
    views[k] = ts[k]->as_strided(shape, strides[k], ts[k]->offset());
    ptrs[k] = &views[k];
  }
  return make_offset_calc<N>(ptrs);
}

// calc: operand 0 is the index, operand 1 the source with its stride along dim zeroed; walked in
// the index's row-major order, which is out's (contiguous, the index's shape).
template <typename R>
__global__ void gather_kernel(R* out, const R* src, const int64_t* idx, OffsetCalc<2> calc, int64_t n,
                              int64_t src_stride) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    int64_t off[2];
    calc.get(e, off);
    out[e] = src[off[1] + idx[off[0]] * src_stride];
  }
}

void cuda_gather(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  Shape src_strides = src.strides();
  src_strides[dim] = 0;
  const OffsetCalc<2> calc = offsets_over<2>(index.shape(), {&index, &src}, {index.strides(), src_strides});
  dispatch_raw(src.itemsize(), "gather", [&](auto tag) {
    using R = decltype(tag);
    launch(gather_kernel<R>, map_blocks(n), kMapThreads, 0, kernel_stream(), static_cast<R*>(out.raw_data()),
           static_cast<const R*>(src.raw_data()), static_cast<const int64_t*>(index.raw_data()), calc, n,
           src.stride(dim));
  });
}

// The strides of a scatter along dim: out, src and index.
struct FiberStrides {
  int64_t out, src, index;
};

template <bool Accumulate, typename T>
EMBER_DEVICE void apply(T& o, T v) {
  if constexpr (Accumulate)
    o = static_cast<T>(o + v);
  else
    o = v;
}

// fibers: the first element's offsets of each fiber (operands index, out, src), fibers numbered
// in row-major order of the index's shape without dim.
template <typename T, bool Accumulate>
__global__ void scatter_by_fiber(T* out, const T* src, const int64_t* idx, OffsetCalc<3> fibers, int64_t nfibers,
                                 int64_t len, FiberStrides st) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t f = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < nfibers; f += step) {
    int64_t off[3];
    fibers.get(f, off);
    for (int64_t k = 0; k < len; ++k)
      apply<Accumulate>(out[off[1] + idx[off[0] + k * st.index] * st.out], src[off[2] + k * st.src]);
  }
}

// Position j = f * len + k (fiber f, k along dim) has the key f * size + index.
__global__ void scatter_keys(const int64_t* idx, OffsetCalc<3> fibers, int64_t m, int64_t len, int64_t index_stride,
                             int64_t size, int64_t* keys) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m; j += step) {
    const int64_t f = j / len, k = j % len;
    int64_t off[3];
    fibers.get(f, off);
    keys[j] = f * size + idx[off[0] + k * index_stride];
  }
}

// Thread per group slot q; the thread at the head of a key's group applies the group in order.
template <typename T, bool Accumulate>
__global__ void scatter_by_group(T* out, const T* src, const int64_t* keys, const int64_t* perm, const int64_t* start,
                                 OffsetCalc<3> fibers, int64_t m, int64_t len, int64_t size, FiberStrides st) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < m; q += step) {
    const int64_t key = keys[perm[q]];
    if (start[key] != q) continue;
    const int64_t end = start[key + 1];
    int64_t off[3];
    fibers.get(key / size, off);
    T& o = out[off[1] + (key % size) * st.out];
    const T* s = src + off[2];
    if constexpr (Accumulate) {
      T acc = o;
      for (int64_t p = q; p < end; ++p) acc = static_cast<T>(acc + s[(perm[p] % len) * st.src]);
      o = acc;
    } else {
      o = s[(perm[end - 1] % len) * st.src];
    }
  }
}

template <typename T, bool Accumulate>
void scatter_typed(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t len = index.size(dim), m = index.numel(), nfibers = m / len, size = out.size(dim);
  const int64_t nkeys = nfibers * size;  // at most out.numel()
  Shape fiber_shape = index.shape();
  fiber_shape[dim] = 1;
  const OffsetCalc<3> fibers =
      offsets_over<3>(fiber_shape, {&index, &out, &src}, {index.strides(), out.strides(), src.strides()});
  const FiberStrides st{out.stride(dim), src.stride(dim), index.stride(dim)};
  T* o = static_cast<T*>(out.raw_data());
  const T* s = static_cast<const T*>(src.raw_data());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  const cudaStream_t stream = kernel_stream();
  if (len <= kShortFiber || nfibers >= kManyFibers || nkeys > kKeysPerPosition * m) {
    launch(scatter_by_fiber<T, Accumulate>, map_blocks(nfibers), kMapThreads, 0, stream, o, s, idx, fibers, nfibers,
           len, st);
    return;
  }
  Tensor keys = empty({m}, {.dtype = DType::Int64, .device = out.device()});
  int64_t* k = static_cast<int64_t*>(keys.raw_data());
  launch(scatter_keys, map_blocks(m), kMapThreads, 0, stream, idx, fibers, m, len, st.index, size, k);
  const KeyGroups groups = group_by_key(k, m, nkeys, out.device());
  launch(scatter_by_group<T, Accumulate>, map_blocks(m), kMapThreads, 0, stream, o, s, k, groups.perm, groups.start,
         fibers, m, len, size, st);
}

void cuda_scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  if (index.numel() == 0) return;
  DeviceGuard guard(out.device());
  if (accumulate) {
    EMBER_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] { scatter_typed<scalar_t, true>(out, dim, index, src); });
  } else {
    dispatch_raw(out.itemsize(), "scatter",
                 [&](auto tag) { scatter_typed<decltype(tag), false>(out, dim, index, src); });
  }
}

}  // namespace

EMBER_REGISTER_KERNEL(gather_stub, CUDA, cuda_gather);
EMBER_REGISTER_KERNEL(scatter_stub, CUDA, cuda_scatter);

}  // namespace ember::cuda
