// CUDA sort and topk along any dim (core/index_kernels.h: sort_stub), bit for bit the CPU's result
// (core/cpu/sort_kernel.cpp): the same values and the same indices, ties in index order (a stable
// order), NaN above +inf, -0 equal to +0, for every dtype.
//
// Every element becomes an unsigned key whose integer order is the wanted order (floats: the
// sign-magnitude bits mapped to an order-preserving integer, NaN mapped to the largest key, -0 to
// +0; integers: the sign bit flipped; all bits flipped for largest first), paired with its
// position along dim. Sorting (key, position) pairs lexicographically makes the order total, so
// any correct sort gives the CPU's permutation exactly, stable or not.
//  - Rows (the fibers along dim, any strides) of up to kSharedRow32 elements (32-bit keys:
//    float32/16, bfloat16, int32, uint8, bool) or kSharedRow64 (64-bit keys: float64, int64) are
//    sorted in shared memory by a bitonic network, padded to a power of two P with keys that sort
//    after every real entry (the largest key with a position >= the row's length). Short rows
//    share a block (G = 512 / P rows per block), so a block always has work for its threads.
//  - Longer rows, of any length: the same kernel sorts chunks of kShared* elements into global
//    scratch, then merge passes double the sorted runs until one run spans the row. In a pass
//    every entry finds its place in the merged run on its own: its position in its own run plus the
//    number of entries of the partner run that sort before it (a binary search; no two entries are
//    equal). topk keeps only the first k entries of every run (an entry at position >= k of its run
//    cannot reach the first k of the merged run), so a small k costs a fraction of a full sort.
//    A last kernel gathers the values and writes the outputs.
// The result depends on nothing but the input (no atomics, no timing), so it is reproducible.
#include <algorithm>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"
#include "core/cuda/strided_dims.h"
#include "core/index_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPairsPerBlock = 256;     // compare-exchange pairs per block and stage (rows of <= 512 share blocks)
constexpr int64_t kSharedRow32 = 4096;  // 32 KiB of keys and positions
constexpr int64_t kSharedRow64 = 2048;  // 24 KiB
constexpr int64_t kMaxBlocks = 16384;   // grid-stride loops cover the rest
constexpr int kDims = 8;

// ------------------------------------------------------------------ keys
enum class KeyKind : int { F32, F64, F16, BF16, I32, I64, U8 };

// S: the raw storage of one element (values are copied as bits); U: its key.
template <KeyKind K>
struct KeyTypes {
  using S = uint32_t;
  using U = uint32_t;
};
template <>
struct KeyTypes<KeyKind::F64> {
  using S = uint64_t;
  using U = uint64_t;
};
template <>
struct KeyTypes<KeyKind::I64> {
  using S = uint64_t;
  using U = uint64_t;
};
template <>
struct KeyTypes<KeyKind::F16> {
  using S = uint16_t;
  using U = uint32_t;
};
template <>
struct KeyTypes<KeyKind::BF16> {
  using S = uint16_t;
  using U = uint32_t;
};
template <>
struct KeyTypes<KeyKind::U8> {
  using S = uint8_t;
  using U = uint32_t;
};

// The CPU's float_key on raw bits (x + 0 there turns -0 into +0; here the bits say so, which no
// compiler flag can fold away).
EMBER_DEVICE uint32_t f32_key(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffu;  // NaN: above +inf
  if ((u & 0x7fffffffu) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
EMBER_DEVICE uint64_t f64_key(uint64_t u) {
  constexpr uint64_t kSign = uint64_t{1} << 63;
  if ((u & ~kSign) > 0x7ff0000000000000ull) return ~uint64_t{0};
  if ((u & ~kSign) == 0) u = 0;
  return (u & kSign) ? ~u : (u | kSign);
}

template <KeyKind K>
EMBER_DEVICE typename KeyTypes<K>::U sort_key(typename KeyTypes<K>::S s) {
  if constexpr (K == KeyKind::F32)
    return f32_key(s);
  else if constexpr (K == KeyKind::F64)
    return f64_key(s);
  else if constexpr (K == KeyKind::F16)
    return f32_key(float_as_bits(half_bits_to_float(s)));  // the CPU keys float16 as float
  else if constexpr (K == KeyKind::BF16)
    return f32_key(static_cast<uint32_t>(s) << 16);
  else if constexpr (K == KeyKind::I32)
    return s ^ 0x80000000u;
  else if constexpr (K == KeyKind::I64)
    return s ^ (uint64_t{1} << 63);
  else
    return static_cast<uint32_t>(s);  // uint8, bool
}

// (ka, pa) sorts after (kb, pb).
template <typename U, typename P>
EMBER_DEVICE bool after(U ka, P pa, U kb, P pb) {
  return ka > kb || (ka == kb && pa > pb);
}

// ------------------------------------------------------------------ layout
// The rows: a's dims other than `dim`, coalesced; row r (row-major over those dims, so
// r = outer * inner + i) starts at offset(r).
using RowDims = StridedDims<kDims>;

struct SortPlan {
  int64_t rows = 1, n = 1, k = 1, inner = 1;
  int64_t stride = 1;  // a's stride along dim
  int64_t seg = 1;     // elements per chunk sorted in shared memory (n when a row fits)
  int64_t nseg = 1;    // chunks per row
  bool largest = false;
  RowDims row;
};

// Per chunk of a block's group: where it starts in a, where its results go.
struct Chunk {
  int64_t base;   // a's offset of the chunk's first element
  int64_t start;  // position of that element in its row
  int64_t out;    // output offset of entry 0 (final outputs: [outer, k, inner]; scratch: row * n + start)
  int64_t len;    // elements (0: past the last chunk)
};

// ------------------------------------------------------------------ shared-memory bitonic sort
// Bitonic network over each chunk of P: pair t compares i and i + j, ascending where bit
// `size` of i's position within the chunk is clear (the last merge sorts every chunk up).
// The 32 pairs of a warp's step lie in one aligned 64-entry segment whenever j <= 32, and
// every step gives a warp the same segments (blockDim is a multiple of 32), so between two
// such stages the warp's own __syncwarp suffices; a block barrier is needed only next to a
// stage with j > 32 (50 of the 78 stages of a 4096-entry sort end in a __syncwarp).
// Every thread of the block takes part (it ends in a barrier or a warp sync that all reach).
template <typename U>
EMBER_DEVICE void bitonic_sort_chunks(U* key, uint32_t* pos, int P, int E) {
  for (int size = 2; size <= P; size <<= 1) {
    for (int j = size >> 1; j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < E / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (j - 1)), l = i + j;
        const bool up = (i & (P - 1) & size) == 0;
        const U ki = key[i], kl = key[l];
        const uint32_t pi = pos[i], pl = pos[l];
        if (after(ki, pi, kl, pl) == up) {
          key[i] = kl;
          key[l] = ki;
          pos[i] = pl;
          pos[l] = pi;
        }
      }
      const int next_j = j > 1 ? j >> 1 : size;  // size: the next merge's first stage (or none)
      if (j > 32 || next_j > 32 || (j == 1 && size == P))
        __syncthreads();
      else
        __syncwarp();
    }
  }
}

// Each block sorts G chunks of up to P = 2^log_p elements at a time. With one chunk per row
// (nseg == 1) it writes the first k values and indices; otherwise the first min(len, k) (key,
// position) pairs of each chunk to scratch, for the merge passes.
template <KeyKind K>
__global__ void sort_chunks(const typename KeyTypes<K>::S* a, typename KeyTypes<K>::S* values, int64_t* indices,
                            typename KeyTypes<K>::U* skey, int64_t* spos, SortPlan p, int log_p, int log_g) {
  using U = typename KeyTypes<K>::U;
  const int P = 1 << log_p, G = 1 << log_g, E = G * P;
  EMBER_DYNAMIC_SHARED(unsigned char, smem);
  U* key = reinterpret_cast<U*>(smem);                            // [E]
  Chunk* chunk = reinterpret_cast<Chunk*>(smem + sizeof(U) * E);  // [G]
  uint32_t* pos = reinterpret_cast<uint32_t*>(chunk + G);         // [E]
  const U flip = p.largest ? static_cast<U>(~U(0)) : U(0);
  const bool final_out = p.nseg == 1;
  // Neighbouring rows are neighbours in memory when inner > 1 (sorting along a leading dim): then
  // consecutive threads take the same position of consecutive rows, so loads and stores coalesce.
  const bool interleave = final_out && p.inner > 1 && G > 1;
  const int64_t chunks = p.rows * p.nseg;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * G; c0 < chunks; c0 += static_cast<int64_t>(gridDim.x) * G) {
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      const int64_t c = c0 + g, r = c / p.nseg, start = (c % p.nseg) * p.seg;
      Chunk ch{0, start, 0, 0};
      if (c < chunks) {
        ch.len = dmin(p.seg, p.n - start);
        ch.base = p.row.offset(r) + start * p.stride;
        ch.out = final_out ? (r / p.inner) * p.k * p.inner + r % p.inner : r * p.n + start;
      }
      chunk[g] = ch;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      const int g = interleave ? (e & (G - 1)) : (e >> log_p);
      const int j = interleave ? (e >> log_g) : (e & (P - 1));
      const Chunk& ch = chunk[g];
      U kk = static_cast<U>(~U(0));  // padding: after every real entry (its position is >= len)
      if (j < ch.len) kk = static_cast<U>(sort_key<K>(a[ch.base + j * p.stride]) ^ flip);
      key[g * P + j] = kk;
      pos[g * P + j] = static_cast<uint32_t>(j);
    }
    __syncthreads();
    bitonic_sort_chunks(key, pos, P, E);
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      const int g = interleave ? (e & (G - 1)) : (e >> log_p);
      const int j = interleave ? (e >> log_g) : (e & (P - 1));
      const Chunk& ch = chunk[g];
      if (j >= dmin(ch.len, p.k)) continue;
      const int64_t src = ch.start + pos[g * P + j];
      if (final_out) {
        const int64_t o = ch.out + j * p.inner;
        values[o] = a[ch.base + (src - ch.start) * p.stride];
        indices[o] = src;
      } else {
        skey[ch.out + j] = key[g * P + j];
        spos[ch.out + j] = src;
      }
    }
    __syncthreads();  // the next group overwrites the shared arrays
  }
}

// ------------------------------------------------------------------ merge passes (long rows)
// Merges runs of width w (each holding its first min(len, k) entries sorted) pairwise into runs
// of 2w, keeping the first k. Thread per (row, run, position < min(w, k)).
template <typename U>
__global__ void merge_runs(const U* key_in, const int64_t* pos_in, U* key_out, int64_t* pos_out, int64_t rows,
                           int64_t n, int64_t k, int64_t w) {
  const int64_t runs = (n + w - 1) / w, L = dmin(w, k), total = rows * runs * L;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t i = e % L, run = (e / L) % runs, r = e / (L * runs);
    const int64_t start = run * w;
    if (i >= dmin(n - start, L)) continue;  // the row's last run is short
    const int64_t row0 = r * n;
    const U kk = key_in[row0 + start + i];
    const int64_t pp = pos_in[row0 + start + i];
    const int64_t other = (run ^ 1) * w;
    int64_t lo = 0;
    if (other < n) {
      int64_t hi = dmin(n - other, L);
      while (lo < hi) {  // partner entries that sort before (kk, pp)
        const int64_t mid = (lo + hi) / 2;
        if (after(kk, pp, key_in[row0 + other + mid], pos_in[row0 + other + mid]))
          lo = mid + 1;
        else
          hi = mid;
      }
    }
    const int64_t at = i + lo;
    if (at < k) {
      const int64_t o = row0 + (run & ~int64_t{1}) * w + at;
      key_out[o] = kk;
      pos_out[o] = pp;
    }
  }
}

// values/indices ([outer, k, inner]) from the sorted positions of every row (scratch: row * n).
template <typename S>
__global__ void gather_sorted(const S* a, S* values, int64_t* indices, const int64_t* spos, SortPlan p) {
  const int64_t total = p.rows * p.k;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t j = e % p.k, r = e / p.k;
    const int64_t src = spos[r * p.n + j];
    const int64_t o = ((r / p.inner) * p.k + j) * p.inner + r % p.inner;
    values[o] = a[p.row.offset(r) + src * p.stride];
    indices[o] = src;
  }
}

// ------------------------------------------------------------------ host side
int ceil_log2(int64_t x) {
  int l = 0;
  while ((int64_t{1} << l) < x) ++l;
  return l;
}

unsigned grid_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + per_block - 1) / per_block, 1, kMaxBlocks));
}

// false when a's other dims do not coalesce into kDims groups.
bool make_rows(const Tensor& a, int64_t dim, RowDims* rd) {
  return coalesce_dims(a, 0, a.dim(), dim, rd);
}

template <KeyKind K>
void run_sort(const Tensor& values, const Tensor& indices, const Tensor& a_in, int64_t dim, bool largest) {
  using S = typename KeyTypes<K>::S;
  using U = typename KeyTypes<K>::U;
  SortPlan p;
  Tensor a = a_in;
  if (!make_rows(a, dim, &p.row)) {
    a = a_in.contiguous();  // more than kDims scattered dims: one copy makes them two
    make_rows(a, dim, &p.row);
  }
  p.n = a.size(dim);
  p.k = values.size(dim);
  p.rows = a.numel() / p.n;
  for (int64_t d = dim + 1; d < a.dim(); ++d) p.inner *= a.size(d);
  p.stride = a.stride(dim);
  p.largest = largest;
  const int64_t cap = sizeof(U) == 4 ? kSharedRow32 : kSharedRow64;
  p.seg = std::min(p.n, cap);
  p.nseg = (p.n + p.seg - 1) / p.seg;
  const int log_p = std::max(1, ceil_log2(p.seg));
  const int64_t P = int64_t{1} << log_p, chunks = p.rows * p.nseg;
  int log_g = std::max(0, ceil_log2(2 * kPairsPerBlock) - log_p);
  log_g = std::min(log_g, ceil_log2(chunks));  // no more rows per block than there are
  const int64_t G = int64_t{1} << log_g;
  const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>(G * P / 2, 32, kThreads));
  const size_t shared = static_cast<size_t>(G * P) * (sizeof(U) + sizeof(uint32_t)) + G * sizeof(Chunk);

  const S* x = static_cast<const S*>(a.raw_data());
  S* v = static_cast<S*>(values.raw_data());
  int64_t* ix = static_cast<int64_t*>(indices.raw_data());
  const cudaStream_t stream = kernel_stream();
  if (p.nseg == 1) {
    launch(sort_chunks<K>, grid_for(chunks, G), threads, shared, stream, x, v, ix, static_cast<U*>(nullptr),
           static_cast<int64_t*>(nullptr), p, log_p, log_g);
    return;
  }
  // Ping-pong scratch: keys and positions, two buffers of rows * n each.
  const int64_t m = p.rows * p.n;
  Tensor keys = empty({2 * m}, {.dtype = sizeof(U) == 4 ? DType::Int32 : DType::Int64, .device = values.device()});
  Tensor poss = empty({2 * m}, {.dtype = DType::Int64, .device = values.device()});
  U* kbuf[2] = {static_cast<U*>(keys.raw_data()), static_cast<U*>(keys.raw_data()) + m};
  int64_t* pbuf[2] = {static_cast<int64_t*>(poss.raw_data()), static_cast<int64_t*>(poss.raw_data()) + m};
  launch(sort_chunks<K>, grid_for(chunks, G), threads, shared, stream, x, v, ix, kbuf[0], pbuf[0], p, log_p, log_g);
  int cur = 0;
  for (int64_t w = p.seg; w < p.n; w *= 2) {
    const int64_t runs = (p.n + w - 1) / w, work = p.rows * runs * std::min(w, p.k);
    launch(merge_runs<U>, grid_for(work, kThreads), kThreads, 0, stream, kbuf[cur], pbuf[cur], kbuf[1 - cur],
           pbuf[1 - cur], p.rows, p.n, p.k, w);
    cur = 1 - cur;
  }
  launch(gather_sorted<S>, grid_for(p.rows * p.k, kThreads), kThreads, 0, stream, x, v, ix, pbuf[cur], p);
}

void cuda_sort(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool largest) {
  if (values.numel() == 0) return;
  DeviceGuard guard(values.device());
  switch (a.dtype()) {
    case DType::Float32:
      return run_sort<KeyKind::F32>(values, indices, a, dim, largest);
    case DType::Float64:
      return run_sort<KeyKind::F64>(values, indices, a, dim, largest);
    case DType::Float16:
      return run_sort<KeyKind::F16>(values, indices, a, dim, largest);
    case DType::BFloat16:
      return run_sort<KeyKind::BF16>(values, indices, a, dim, largest);
    case DType::Int32:
      return run_sort<KeyKind::I32>(values, indices, a, dim, largest);
    case DType::Int64:
      return run_sort<KeyKind::I64>(values, indices, a, dim, largest);
    case DType::UInt8:
    case DType::Bool:
      return run_sort<KeyKind::U8>(values, indices, a, dim, largest);
  }
  EMBER_FAIL("sort: dtype ", dtype_name(a.dtype()), " is not supported");
}

}  // namespace

EMBER_REGISTER_KERNEL(sort_stub, CUDA, cuda_sort);

}  // namespace ember::cuda
