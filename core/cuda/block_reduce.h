// Warp and block reductions for kernels: warp shuffles, then one value per warp through shared
// memory. Blocks must have a multiple of 32 threads (the shuffles name all 32 lanes) and every
// thread of the block must call block_reduce (it holds barriers). Include only from kernel files.
#pragma once

#include "core/cuda/device_api.h"

namespace ember::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

template <typename T, typename Combine>
EMBER_DEVICE T warp_reduce(T v, Combine combine) {
  EMBER_UNROLL
  for (int o = 16; o > 0; o /= 2) v = combine(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// The combination of every thread's v, returned to every thread of the block. `identity` is
// combine's neutral element.
template <typename T, typename Combine>
EMBER_DEVICE T block_reduce(T v, Combine combine, T identity) {
  EMBER_SHARED(T, partial, [32]);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_reduce(v, combine);
  __syncthreads();  // the previous call's readers are done with `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < nwarps ? partial[lane] : identity;
  return warp_reduce(v, combine);
}

// Threads for a block that reduces `n` values: a multiple of 32 up to `max_threads`.
inline unsigned reduce_threads(int64_t n, unsigned max_threads = 256) {
  unsigned t = 32;
  while (t < max_threads && static_cast<int64_t>(t) < n) t *= 2;
  return t;
}

}  // namespace ember::cuda
