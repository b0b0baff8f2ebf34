// Grouping positions by key, deterministically (group_by_key.h). Four steps:
//   1. count[t] = number of positions with key t (integer atomics: exact in any order);
//   2. start = exclusive prefix sum of count, with start[nkeys] = m: one block for up to 4096
//      keys; above that, each block sums a contiguous chunk, one block scans the chunk sums, and
//      each block scans its chunk from its offset, a tile of 256 at a time (warp shuffles);
//   3. each position takes a slot of its group by counting the group's count down atomically
//      (perm[start[t] + count[t] - 1] = j): which slot depends on thread timing ...
//   4. ... so one thread per group then heap-sorts the group's positions, which makes perm the
//      same on every run: each group in increasing position order.
// The work is O(m + nkeys) plus O(g log g) per group of g positions (a group's combination is
// sequential anyway, to follow the position order). index_add used to rank positions by counting
// the equal keys before each one, O(m^2); this replaces it.
#include <algorithm>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/group_by_key.h"
#include "core/cuda/launch.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = kMapThreads;
constexpr int64_t kScanChunk = 16 * kThreads;  // keys per block of the multi-block scan, at least
constexpr int64_t kMaxScanBlocks = 1024;       // so that the chunk sums fit the one-block scan

__global__ void count_keys(const int64_t* keys, int64_t m, unsigned long long* count) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m; j += step)
    atomicAdd(&count[keys[j]], 1ull);
}

// start[0..n] = exclusive prefix sum of count[0..n), by one block: each thread scans a
// contiguous chunk, then the chunk totals are scanned through shared memory.
__global__ void exclusive_scan(const unsigned long long* count, int64_t* start, int64_t n) {
  EMBER_SHARED(int64_t, totals, [kThreads]);
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t b = dmin<int64_t>(threadIdx.x * chunk, n), e = dmin<int64_t>(b + chunk, n);
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
    start[n] = run;
  }
  __syncthreads();
  int64_t run = totals[threadIdx.x];
  for (int64_t i = b; i < e; ++i) {
    start[i] = run;
    run += static_cast<int64_t>(count[i]);
  }
}

struct AddI64 {
  EMBER_DEVICE int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};

// sums[b] = the sum of block b's chunk of count.
__global__ void chunk_sums(const unsigned long long* count, int64_t n, int64_t chunk, unsigned long long* sums) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * chunk, e = dmin<int64_t>(b + chunk, n);
  int64_t s = 0;
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) s += static_cast<int64_t>(count[i]);
  s = block_reduce(s, AddI64{}, int64_t{0});
  if (threadIdx.x == 0) sums[blockIdx.x] = static_cast<unsigned long long>(s);
}

// The inclusive prefix sum of v over the block (a multiple of 32 threads; every thread calls
// it), and the block's total in *total.
EMBER_DEVICE int64_t block_inclusive_scan(int64_t v, int64_t* total) {
  EMBER_SHARED(int64_t, warp_sums, [32]);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  EMBER_UNROLL
  for (int o = 1; o < 32; o *= 2) {
    const int64_t u = __shfl_up_sync(kFullMask, v, o);
    if (lane >= static_cast<unsigned>(o)) v += u;
  }
  __syncthreads();  // the previous call's readers are done with warp_sums
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < nwarps ? warp_sums[lane] : 0;
    EMBER_UNROLL
    for (int o = 1; o < 32; o *= 2) {
      const int64_t u = __shfl_up_sync(kFullMask, w, o);
      if (lane >= static_cast<unsigned>(o)) w += u;
    }
    if (lane < nwarps) warp_sums[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v += warp_sums[warp - 1];
  *total = warp_sums[nwarps - 1];
  return v;
}

// start[i] for block b's chunk: offsets[b] plus the exclusive prefix sum inside the chunk.
// offsets[gridDim.x] is the grand total, start[n].
__global__ void scan_chunks(const unsigned long long* count, int64_t n, int64_t chunk, const int64_t* offsets,
                            int64_t* start) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * chunk, e = dmin<int64_t>(b + chunk, n);
  int64_t carry = offsets[blockIdx.x];
  // Every thread runs every tile (the scan holds barriers); those past the end add zero.
  for (int64_t t = b; t < e; t += blockDim.x) {
    const int64_t i = t + threadIdx.x;
    const int64_t v = i < e ? static_cast<int64_t>(count[i]) : 0;
    int64_t tile_total = 0;
    const int64_t inclusive = block_inclusive_scan(v, &tile_total);
    if (i < e) start[i] = carry + inclusive - v;
    carry += tile_total;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) start[n] = offsets[gridDim.x];
}

// start = exclusive prefix sum of count[0..n), start[n] = the total. `sums` has room for
// kMaxScanBlocks + 1 counts and offsets each.
void scan_counts(const unsigned long long* count, int64_t n, int64_t* start, unsigned long long* sums, int64_t* offsets,
                 cudaStream_t stream) {
  if (n <= kScanChunk) {
    launch(exclusive_scan, 1, kThreads, 0, stream, count, start, n);
    return;
  }
  int64_t blocks = std::min<int64_t>((n + kScanChunk - 1) / kScanChunk, kMaxScanBlocks);
  const int64_t chunk = (n + blocks - 1) / blocks;
  blocks = (n + chunk - 1) / chunk;
  launch(chunk_sums, static_cast<unsigned>(blocks), kThreads, 0, stream, count, n, chunk, sums);
  launch(exclusive_scan, 1, kThreads, 0, stream, sums, offsets, blocks);
  launch(scan_chunks, static_cast<unsigned>(blocks), kThreads, 0, stream, count, n, chunk, offsets, start);
}

// Slots are handed out from the end of each group down; count ends at zero.
__global__ void place(const int64_t* keys, int64_t m, const int64_t* start, unsigned long long* count, int64_t* perm) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m; j += step) {
    const int64_t t = keys[j];
    // Adding ~0 subtracts one (CUDA has no 64-bit atomicSub); the old value is this slot + 1.
    const unsigned long long left = atomicAdd(&count[t], ~0ull);
    perm[start[t] + static_cast<int64_t>(left) - 1] = j;
  }
}

EMBER_DEVICE void sift_down(int64_t* a, int64_t i, int64_t n) {
  const int64_t v = a[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && a[c + 1] > a[c]) ++c;
    if (a[c] <= v) break;
    a[i] = a[c];
    i = c;
  }
  a[i] = v;
}

// In place and without recursion or extra memory (groups can be as large as m).
EMBER_DEVICE void heap_sort(int64_t* a, int64_t n) {
  for (int64_t i = n / 2 - 1; i >= 0; --i) sift_down(a, i, n);
  for (int64_t e = n - 1; e > 0; --e) {
    const int64_t top = a[0];
    a[0] = a[e];
    a[e] = top;
    sift_down(a, 0, e);
  }
}

__global__ void sort_groups(const int64_t* start, int64_t nkeys, int64_t* perm) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < nkeys; t += step) {
    const int64_t b = start[t], n = start[t + 1] - b;
    if (n > 1) heap_sort(perm + b, n);
  }
}

}  // namespace

KeyGroups group_by_key(const int64_t* keys, int64_t m, int64_t nkeys, Device device) {
  EMBER_CHECK(m >= 1 && nkeys >= 1, "group_by_key: expected at least one position and one key, got ", m, " and ",
              nkeys);
  KeyGroups g;
  // count[nkeys] (zeroed, then the placement cursor), start[nkeys + 1], perm[m], and the
  // multi-block scan's chunk sums and offsets.
  constexpr int64_t kScanScratch = 2 * (kMaxScanBlocks + 1);
  g.scratch = empty({2 * nkeys + 1 + m + kScanScratch}, {.dtype = DType::Int64, .device = device});
  g.scratch.narrow(0, 0, nkeys).zero_();
  int64_t* base = static_cast<int64_t*>(g.scratch.raw_data());
  auto* count = reinterpret_cast<unsigned long long*>(base);
  int64_t* start = base + nkeys;
  int64_t* perm = start + nkeys + 1;
  const cudaStream_t stream = kernel_stream();
  launch(count_keys, map_blocks(m), kThreads, 0, stream, keys, m, count);
  int64_t* scan_scratch = perm + m;
  scan_counts(count, nkeys, start, reinterpret_cast<unsigned long long*>(scan_scratch),
              scan_scratch + kMaxScanBlocks + 1, stream);
  launch(place, map_blocks(m), kThreads, 0, stream, keys, m, start, count, perm);
  launch(sort_groups, map_blocks(nkeys), kThreads, 0, stream, start, nkeys, perm);
  g.start = start;
  g.perm = perm;
  return g;
}

}  // namespace ember::cuda
