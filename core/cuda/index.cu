// CUDA index_select and a deterministic index_add (core/index_kernels.h): the embedding layer's
// forward and backward, and the adjoint pair of every gather along one dim.
// index_select moves raw elements (one kernel per element width). index_add must not depend on
// thread timing, so instead of float atomics it groups the source rows by destination in index
// order and lets one thread sum each (destination, column) group in that order:
//   1. rank[j] = number of earlier positions with the same index (a tiled O(m^2) count, cheap for
//      the few thousand tokens of a batch), count[t] by integer atomics (exact);
//   2. start[t] = exclusive prefix sum of count (one block);
//   3. perm[start[idx[j]] + rank[j]] = j;
//   4. the thread at the head of each group adds its rows to the destination, in index order.
// The result is bit-for-bit reproducible run to run and equals the CPU's sum order.
#include <algorithm>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/index_kernels.h"
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
  switch (src.itemsize()) {
    case 1:
      run(uint8_t{});
      break;
    case 2:
      run(uint16_t{});
      break;
    case 4:
      run(uint32_t{});
      break;
    case 8:
      run(uint64_t{});
      break;
    default:
      EMBER_FAIL("index_select: unsupported element size ", src.itemsize());
  }
}

// rank[j] = #{j' < j : idx[j'] == idx[j]}, count[idx[j]] += 1. Index tiles go through shared
// memory so that a block reads each index once per tile.
__global__ void rank_and_count(const int64_t* idx, int64_t m, int64_t* rank, unsigned long long* count) {
  EMBER_SHARED(int64_t, tile, [kThreads]);
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t mine = j < m ? idx[j] : -1;
  const int64_t block_end = dmin<int64_t>(static_cast<int64_t>(blockIdx.x + 1) * blockDim.x, m);
  int64_t r = 0;
  for (int64_t t0 = 0; t0 < block_end; t0 += kThreads) {
    __syncthreads();  // the previous tile's readers are done
    if (t0 + threadIdx.x < m) tile[threadIdx.x] = idx[t0 + threadIdx.x];
    __syncthreads();
    const int64_t len = dmin<int64_t>(kThreads, m - t0);
    for (int64_t k = 0; k < len && t0 + k < j; ++k) r += tile[k] == mine;
  }
  if (j < m) {
    rank[j] = r;
    atomicAdd(&count[mine], 1ull);
  }
}

// Exclusive prefix sum of count into start, by one block: each thread scans a contiguous chunk,
// then the chunk totals are scanned through shared memory.
__global__ void exclusive_scan(const unsigned long long* count, int64_t* start, int64_t n) {
  EMBER_SHARED(int64_t, totals, [kThreads]);
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t b = threadIdx.x * chunk, e = dmin<int64_t>(b + chunk, n);
  int64_t sum = 0;
  for (int64_t i = b; i < e; ++i) sum += static_cast<int64_t>(count[i]);
  totals[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (unsigned k = 0; k < blockDim.x; ++k) {
      const int64_t t = totals[k];
      totals[k] = run;
      run += t;
    }
  }
  __syncthreads();
  int64_t run = totals[threadIdx.x];
  for (int64_t i = b; i < e; ++i) {
    start[i] = run;
    run += static_cast<int64_t>(count[i]);
  }
}

__global__ void place(const int64_t* idx, const int64_t* rank, const int64_t* start, int64_t m, int64_t* perm) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m; j += step)
    perm[start[idx[j]] + rank[j]] = j;
}

// Thread per (outer, group position k, column); only the head of each group works.
template <typename T>
__global__ void add_groups(T* out, const T* src, const int64_t* idx, const int64_t* perm, const int64_t* start,
                           const unsigned long long* count, int64_t outer, int64_t m, int64_t size, int64_t inner) {
  const int64_t n = outer * m * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t i = e % inner, k = (e / inner) % m, o = e / (inner * m);
    const int64_t t = idx[perm[k]];
    if (start[t] != k) continue;
    T acc = out[(o * size + t) * inner + i];
    const int64_t end = k + static_cast<int64_t>(count[t]);
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
  // Scratch: count[size] (zeroed), start[size], rank[m], perm[m].
  Tensor scratch = empty({2 * d.size + 2 * m}, {.dtype = DType::Int64, .device = out.device()});
  scratch.narrow(0, 0, d.size).zero_();
  int64_t* base = static_cast<int64_t*>(scratch.raw_data());
  auto* count = reinterpret_cast<unsigned long long*>(base);
  int64_t* start = base + d.size;
  int64_t* rank = start + d.size;
  int64_t* perm = rank + m;
  const cudaStream_t stream = kernel_stream();
  launch(rank_and_count, static_cast<unsigned>((m + kThreads - 1) / kThreads), kThreads, 0, stream, idx, m, rank,
         count);
  launch(exclusive_scan, 1, kThreads, 0, stream, count, start, d.size);
  launch(place, blocks_for(m), kThreads, 0, stream, idx, rank, start, m, perm);
  EMBER_DISPATCH_NUMERIC(out.dtype(), "index_add", [&] {
    using T = scalar_t;
    launch(add_groups<T>, blocks_for(d.outer * m * inner), kThreads, 0, stream, static_cast<T*>(out.raw_data()),
           static_cast<const T*>(src.raw_data()), idx, perm, start, count, d.outer, m, d.size, inner);
  });
}

}  // namespace

EMBER_REGISTER_CUDA_KERNEL(index_select_stub, cuda_index_select);
EMBER_REGISTER_CUDA_KERNEL(index_add_stub, cuda_index_add);

}  // namespace ember::cuda
