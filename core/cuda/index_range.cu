// CUDA index_range (core/index_kernels.h): the min and max of an int64 index tensor, which every
// indexing op checks before a kernel trusts the indices. Each block reduces a grid-stride share
// (warp shuffles, then shared memory: block_reduce.h) to one (min, max) pair; when there is more
// than one block, the same kernel run by one block reduces the pairs. The two values come back in
// one 16-byte device-to-host copy, which waits for the kernels (the op needs them on the host).
// Min and max are exact in any order, so the result never depends on thread timing.
#include <algorithm>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/index_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kPerThread = 8;     // elements per thread before a block is added
constexpr int64_t kMaxBlocks = 1024;  // so that the second pass is one block of 4 loads per thread

struct MinOp {
  EMBER_DEVICE int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};
struct MaxOp {
  EMBER_DEVICE int64_t operator()(int64_t a, int64_t b) const { return a < b ? b : a; }
};

// lo_out[blockIdx.x] = min of lo_in[0..n), hi_out[blockIdx.x] = max of hi_in[0..n), over this
// block's grid-stride share (the first pass reads the index twice through one pointer).
__global__ void range_kernel(const int64_t* lo_in, const int64_t* hi_in, int64_t n, int64_t* lo_out, int64_t* hi_out) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    lo = MinOp{}(lo, lo_in[i]);
    hi = MaxOp{}(hi, hi_in[i]);
  }
  lo = block_reduce(lo, MinOp{}, static_cast<int64_t>(INT64_MAX));
  hi = block_reduce(hi, MaxOp{}, static_cast<int64_t>(INT64_MIN));
  if (threadIdx.x == 0) {
    lo_out[blockIdx.x] = lo;
    hi_out[blockIdx.x] = hi;
  }
}

void cuda_index_range(const Tensor& index, int64_t* lo, int64_t* hi) {
  const int64_t n = index.numel();
  EMBER_CHECK(n > 0, "index_range: the index is empty (it has no min or max)");
  EMBER_CHECK(index.dtype() == DType::Int64 && index.is_contiguous(),
              "index_range: expected a contiguous int64 tensor, got ", dtype_name(index.dtype()),
              index.is_contiguous() ? "" : " (strided)");
  DeviceGuard guard(index.device());
  const int64_t blocks = std::clamp<int64_t>((n + kThreads * kPerThread - 1) / (kThreads * kPerThread), 1, kMaxBlocks);
  // Per-block pairs: lo[blocks] then hi[blocks]; then the final pair.
  Tensor scratch = empty({2 * blocks + 2}, {.dtype = DType::Int64, .device = index.device()});
  int64_t* part = static_cast<int64_t*>(scratch.raw_data());
  const int64_t* p = static_cast<const int64_t*>(index.raw_data());
  const cudaStream_t stream = kernel_stream();
  launch(range_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, p, p, n, part, part + blocks);
  int64_t* result = part;  // one block: its pair is part[0], part[1]
  if (blocks > 1) {
    result = part + 2 * blocks;
    launch(range_kernel, 1, kThreads, 0, stream, part, part + blocks, blocks, result, result + 1);
  }
  int64_t host[2];
  copy_to_host(host, result, sizeof host);
  *lo = host[0];
  *hi = host[1];
}

}  // namespace

EMBER_REGISTER_KERNEL(index_range_stub, CUDA, cuda_index_range);

}  // namespace ember::cuda
