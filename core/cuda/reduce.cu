// CUDA reductions for core/reduce_kernels.h: sum, mean, prod, max, min, norm, var, std and
// argmax/argmin over the trailing `nred` dims of a view with any strides. Two layouts:
//  - row reduction (the reduced elements of one output are close together): one block per
//    output, each thread a strided share of the row, then warp shuffles and shared memory;
//  - column reduction (the reduced dim is strided and the kept dims are contiguous, as in
//    summing a batch): one thread per output walking its column, so a warp's loads are
//    coalesced across neighbouring outputs.
// A few outputs over long rows (a full reduction has one) take two stages instead of one block
// per output: blocks reduce slices of each row to partials, a second kernel combines them in a
// fixed order (reduce_row_slices, reduce_partials).
// Floating sums accumulate in double, as the CPU kernels do; var/std take two passes (mean,
// then squared deviations).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/cuda/strided_dims.h"
#include "core/reduce_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kDims = 8;
constexpr int64_t kMaxBlocks = 16384;

using Dims = StridedDims<kDims>;

Dims make_dims(const Tensor& t, int64_t begin, int64_t end, const char* op) {
  Dims g;
  EMBER_CHECK(coalesce_dims(t, begin, end, -1, &g), op, ": CUDA reductions support at most ", kDims,
              " non-mergeable dims per group, got ", shape_str(t.shape()));
  return g;
}

// ------------------------------------------------------------------ reduction functors
enum class SumKind : int { Plain, Abs, Square, Power };

// Sum-like reductions (sum, mean, the p-norms): map each element, add, finish.
template <typename T, typename Acc, typename Out>
struct SumOp {
  using acc_t = Acc;
  using out_t = Out;
  SumKind kind;
  double p, scale;
  EMBER_DEVICE Acc identity() const { return Acc(0); }
  EMBER_DEVICE Acc map(T x) const {
    const Acc v = static_cast<Acc>(x);
    switch (kind) {
      case SumKind::Plain:
        return v;
      case SumKind::Abs:
        return v < Acc(0) ? -v : v;
      case SumKind::Square:
        return v * v;
      case SumKind::Power:
        if constexpr (std::is_floating_point_v<Acc>)
          return d_pow(d_fabs(v), static_cast<Acc>(p));
        else
          return v;
    }
    return v;
  }
  EMBER_DEVICE Acc operator()(Acc a, Acc b) const { return a + b; }
  EMBER_DEVICE Out finish(Acc a, int64_t) const {
    if constexpr (std::is_floating_point_v<Acc>) {
      if (kind == SumKind::Square) return static_cast<Out>(d_sqrt(a));
      if (kind == SumKind::Power) return static_cast<Out>(d_pow(a, 1.0 / p));
      return static_cast<Out>(a * scale);
    }
    return static_cast<Out>(a);
  }
};

template <typename T, typename Acc, typename Out>
struct ProdOp {
  using acc_t = Acc;
  using out_t = Out;
  EMBER_DEVICE Acc identity() const { return Acc(1); }
  EMBER_DEVICE Acc map(T x) const {
    return static_cast<Acc>(static_cast<std::conditional_t<std::is_floating_point_v<Acc>, Acc, int64_t>>(x));
  }
  EMBER_DEVICE Acc operator()(Acc a, Acc b) const { return a * b; }
  EMBER_DEVICE Out finish(Acc a, int64_t) const { return static_cast<Out>(a); }
};

// Max/min, NaN-propagating; `absolute` maps x to |x| (the inf-norm).
template <bool IsMax, typename T>
struct ExtremeOp {
  using acc_t = T;
  using out_t = T;
  T worst;
  bool absolute;
  EMBER_DEVICE T identity() const { return worst; }
  EMBER_DEVICE T map(T x) const {
    if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) {
      if (absolute && x < T(0)) return static_cast<T>(-x);
    }
    return x;
  }
  EMBER_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return IsMax ? max_nan(a, b) : min_nan(a, b);
    return IsMax ? (a > b ? a : b) : (a < b ? a : b);
  }
  EMBER_DEVICE T finish(T a, int64_t) const { return a; }
};

template <typename T, typename Op>
EMBER_DEVICE typename Op::acc_t reduce_row_share(const T* base, int64_t R, const Dims& inner, const Op& op) {
  typename Op::acc_t a = op.identity();
  if (inner.n <= 1) {
    const int64_t s = inner.n == 0 ? 0 : inner.stride[0];
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) a = op(a, op.map(base[r * s]));
  } else {
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) a = op(a, op.map(base[inner.offset(r)]));
  }
  return a;
}

template <typename T, typename Op>
__global__ void reduce_rows(const T* in, typename Op::out_t* out, int64_t M, int64_t R, Dims outer, Dims inner, Op op) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    typename Op::acc_t a = reduce_row_share(in + outer.offset(m), R, inner, op);
    a = block_reduce(a, op, op.identity());
    if (threadIdx.x == 0) out[m] = op.finish(a, R);
  }
}

// Two-stage row reduction, for few outputs with long rows (a full reduction has one output): the
// first stage splits each row into `slices` contiguous ranges of the reduced index, one block
// each (grid x: slices, y: outputs), and leaves one unfinished accumulator per range in
// partial[m * slices + s]; the second combines a row's partials in slice order, one block per
// output, and finishes. Both orders are fixed by the launch geometry alone, never by which
// block runs first, so the result is deterministic.
template <typename T, typename Op>
__global__ void reduce_row_slices(const T* in, typename Op::acc_t* partial, int64_t M, int64_t R, int64_t slices,
                                  Dims outer, Dims inner, Op op) {
  const int64_t chunk = (R + slices - 1) / slices, s = blockIdx.x;
  const int64_t r0 = s * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
  for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
    const T* base = in + outer.offset(m);
    typename Op::acc_t a = op.identity();
    if (inner.n <= 1) {
      const int64_t st = inner.n == 0 ? 0 : inner.stride[0];
      for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) a = op(a, op.map(base[r * st]));
    } else {
      for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) a = op(a, op.map(base[inner.offset(r)]));
    }
    a = block_reduce(a, op, op.identity());
    if (threadIdx.x == 0) partial[m * slices + s] = a;
  }
}

template <typename Op>
__global__ void reduce_partials(const typename Op::acc_t* partial, typename Op::out_t* out, int64_t M, int64_t R,
                                int64_t slices, Op op) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    typename Op::acc_t a = op.identity();
    for (int64_t s = threadIdx.x; s < slices; s += blockDim.x) a = op(a, partial[m * slices + s]);
    a = block_reduce(a, op, op.identity());
    if (threadIdx.x == 0) out[m] = op.finish(a, R);
  }
}

template <typename T, typename Op>
__global__ void reduce_columns(const T* in, typename Op::out_t* out, int64_t M, int64_t R, Dims outer, Dims inner,
                               Op op) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; m < M; m += step) {
    const T* base = in + outer.offset(m);
    typename Op::acc_t a = op.identity();
    for (int64_t r = 0; r < R; ++r) a = op(a, op.map(base[inner.offset(r)]));
    out[m] = op.finish(a, R);
  }
}

// Variance / standard deviation by two passes in double.
template <typename T>
__global__ void var_rows(const T* in, T* out, int64_t M, int64_t R, Dims outer, Dims inner, double correction,
                         bool take_sqrt) {
  const SumOp<T, double, double> sum{SumKind::Plain, 0.0, 1.0};
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* base = in + outer.offset(m);
    const double mean = block_reduce(reduce_row_share(base, R, inner, sum), sum, 0.0) / static_cast<double>(R);
    double m2 = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      const double d = static_cast<double>(base[inner.offset(r)]) - mean;
      m2 += d * d;
    }
    m2 = block_reduce(m2, sum, 0.0);
    if (threadIdx.x == 0) {
      const double n = static_cast<double>(R) - correction;
      const double v = m2 / (n > 0.0 ? n : 0.0);
      out[m] = static_cast<T>(take_sqrt ? d_sqrt(v) : v);
    }
  }
}

template <typename T>
__global__ void var_columns(const T* in, T* out, int64_t M, int64_t R, Dims outer, Dims inner, double correction,
                            bool take_sqrt) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; m < M; m += step) {
    const T* base = in + outer.offset(m);
    double s = 0;
    for (int64_t r = 0; r < R; ++r) s += static_cast<double>(base[inner.offset(r)]);
    const double mean = s / static_cast<double>(R);
    double m2 = 0;
    for (int64_t r = 0; r < R; ++r) {
      const double d = static_cast<double>(base[inner.offset(r)]) - mean;
      m2 += d * d;
    }
    const double n = static_cast<double>(R) - correction;
    const double v = m2 / (n > 0.0 ? n : 0.0);
    out[m] = static_cast<T>(take_sqrt ? d_sqrt(v) : v);
  }
}

// ------------------------------------------------------------------ launching
constexpr unsigned kThreads = 256;
constexpr int64_t kMaxGridY = 65535;
// A block's share of a row in the two-stage reduction: long enough to amortise the block's
// reduction, short enough that a few outputs still fill the GPU.
constexpr int64_t kSliceLength = 4096;
constexpr int64_t kTargetBlocks = 1024;  // about 8 per SM of an H200
constexpr int64_t kMaxSlices = 1024;

// How many slices each row is split into (1: one block per output, reduce_rows). Only when the
// outputs alone leave the GPU mostly idle; a function of the shape only, so a shape is always
// reduced in the same order.
int64_t row_slices(int64_t M, int64_t R) {
  if (M >= kTargetBlocks / 2 || R < 2 * kSliceLength) return 1;
  const int64_t by_length = (R + kSliceLength - 1) / kSliceLength;
  const int64_t by_blocks = (kTargetBlocks + M - 1) / M;
  return std::clamp<int64_t>(std::min(by_length, by_blocks), 1, kMaxSlices);
}

struct Plan {
  int64_t M = 1, R = 1;
  Dims outer, inner;
  bool columns = false;
};

Plan plan(const Tensor& in, int64_t nred, const char* op) {
  Plan p;
  const int64_t k = in.dim() - nred;
  for (int64_t d = 0; d < k; ++d) p.M *= in.size(d);
  for (int64_t d = k; d < in.dim(); ++d) p.R *= in.size(d);
  p.outer = make_dims(in, 0, k, op);
  p.inner = make_dims(in, k, in.dim(), op);
  // Columns when the reduced elements are strided but neighbouring outputs are adjacent.
  const bool inner_strided = p.inner.n > 0 && p.inner.stride[p.inner.n - 1] != 1;
  const bool outer_unit = p.outer.n > 0 && p.outer.stride[p.outer.n - 1] == 1;
  p.columns = inner_strided && outer_unit && p.M >= 32;
  return p;
}

template <typename T, typename Op>
void run(const Tensor& out, const Tensor& in, const Plan& p, Op op) {
  using Out = typename Op::out_t;
  const T* x = static_cast<const T*>(in.raw_data());
  Out* y = static_cast<Out*>(out.raw_data());
  if (p.M == 0) return;
  if (p.columns) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((p.M + 127) / 128, kMaxBlocks));
    launch(reduce_columns<T, Op>, blocks, 128, 0, kernel_stream(), x, y, p.M, p.R, p.outer, p.inner, op);
  } else if (const int64_t slices = row_slices(p.M, p.R); slices > 1) {
    using Acc = typename Op::acc_t;
    Tensor scratch =
        empty({p.M * slices * static_cast<int64_t>(sizeof(Acc))}, {.dtype = DType::UInt8, .device = out.device()});
    Acc* partial = static_cast<Acc*>(scratch.raw_data());
    launch(reduce_row_slices<T, Op>,
           dim3(static_cast<unsigned>(slices), static_cast<unsigned>(std::min<int64_t>(p.M, kMaxGridY))), kThreads, 0,
           kernel_stream(), x, partial, p.M, p.R, slices, p.outer, p.inner, op);
    launch(reduce_partials<Op>, static_cast<unsigned>(std::min<int64_t>(p.M, kMaxBlocks)), reduce_threads(slices), 0,
           kernel_stream(), partial, y, p.M, p.R, slices, op);
  } else {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.M, kMaxBlocks));
    launch(reduce_rows<T, Op>, blocks, reduce_threads(p.R), 0, kernel_stream(), x, y, p.M, p.R, p.outer, p.inner, op);
  }
}

template <typename T>
T worst_value(bool is_max) {
  if constexpr (std::is_floating_point_v<T>)
    return is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  return is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// Per dtype: a template, so that `if constexpr` discards the floating-only kernels for integers.
template <typename T>
void reduce_typed(ReduceOp op, const Tensor& out, const Tensor& in, const Plan& pl, double p) {
  constexpr bool fp = std::is_floating_point_v<T>;
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (fp)
        run<T>(out, in, pl, SumOp<T, double, T>{SumKind::Plain, 0.0, 1.0});
      else
        run<T>(out, in, pl, SumOp<T, int64_t, int64_t>{SumKind::Plain, 0.0, 1.0});
      return;
    case ReduceOp::Prod:
      if constexpr (fp)
        run<T>(out, in, pl, ProdOp<T, double, T>{});
      else
        run<T>(out, in, pl, ProdOp<T, uint64_t, int64_t>{});  // wraps like the CPU's int64 product
      return;
    case ReduceOp::Max:
      run<T>(out, in, pl, ExtremeOp<true, T>{worst_value<T>(true), false});
      return;
    case ReduceOp::Min:
      run<T>(out, in, pl, ExtremeOp<false, T>{worst_value<T>(false), false});
      return;
    default:
      break;
  }
  if constexpr (!fp) {
    EMBER_FAIL(reduce_op_name(op), ": expected a floating-point tensor, got ", dtype_name(in.dtype()));
  } else {
    switch (op) {
      case ReduceOp::Mean:
        run<T>(out, in, pl, SumOp<T, double, T>{SumKind::Plain, 0.0, 1.0 / static_cast<double>(pl.R)});
        return;
      case ReduceOp::Norm:
        if (p == 2.0)
          run<T>(out, in, pl, SumOp<T, double, T>{SumKind::Square, p, 1.0});
        else if (p == 1.0)
          run<T>(out, in, pl, SumOp<T, double, T>{SumKind::Abs, p, 1.0});
        else if (p == std::numeric_limits<double>::infinity())
          run<T>(out, in, pl, ExtremeOp<true, T>{T(0), true});
        else
          run<T>(out, in, pl, SumOp<T, double, T>{SumKind::Power, p, 1.0});
        return;
      case ReduceOp::Var:
      case ReduceOp::Std: {
        if (pl.M == 0) return;
        const T* x = static_cast<const T*>(in.raw_data());
        T* y = static_cast<T*>(out.raw_data());
        const bool sq = op == ReduceOp::Std;
        if (pl.columns)
          launch(var_columns<T>, static_cast<unsigned>(std::min<int64_t>((pl.M + 127) / 128, kMaxBlocks)), 128, 0,
                 kernel_stream(), x, y, pl.M, pl.R, pl.outer, pl.inner, p, sq);
        else
          launch(var_rows<T>, static_cast<unsigned>(std::min<int64_t>(pl.M, kMaxBlocks)), reduce_threads(pl.R), 0,
                 kernel_stream(), x, y, pl.M, pl.R, pl.outer, pl.inner, p, sq);
        return;
      }
      default:
        EMBER_FAIL(reduce_op_name(op), ": unsupported reduction");
    }
  }
}

void cuda_reduce(ReduceOp op, const Tensor& out, const Tensor& in, int64_t nred, double p) {
  DeviceGuard guard(out.device());
  const Plan pl = plan(in, nred, reduce_op_name(op));
  EMBER_DISPATCH_NUMERIC(in.dtype(), reduce_op_name(op), [&] { reduce_typed<scalar_t>(op, out, in, pl, p); });
}

// ------------------------------------------------------------------ argmax / argmin
// The better of two (value, index) candidates: NaN wins (the first NaN), then the extreme value,
// then the smaller index.
template <bool IsMax, typename T>
EMBER_DEVICE bool first_is_better(T v1, int64_t i1, T v2, int64_t i2) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool n1 = v1 != v1, n2 = v2 != v2;
    if (n1 || n2) return n1 && (!n2 || i1 < i2);
  }
  if (v1 == v2) return i1 < i2;
  return IsMax ? v1 > v2 : v1 < v2;
}

template <bool IsMax, typename T>
__global__ void arg_reduce_rows(const T* in, T* values, int64_t* indices, int64_t M, int64_t R, Dims outer,
                                Dims inner) {
  EMBER_SHARED(T, best_v, [32]);
  EMBER_SHARED(int64_t, best_i, [32]);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const T* base = in + outer.offset(m);
    T v = base[0];
    int64_t idx = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      const T x = base[inner.offset(r)];
      if (first_is_better<IsMax>(x, r, v, idx)) {
        v = x;
        idx = r;
      }
    }
    for (int o = 16; o > 0; o /= 2) {
      const T ov = __shfl_xor_sync(kFullMask, v, o);
      const int64_t oi = __shfl_xor_sync(kFullMask, idx, o);
      if (first_is_better<IsMax>(ov, oi, v, idx)) {
        v = ov;
        idx = oi;
      }
    }
    __syncthreads();  // the previous row's readers are done
    if (lane == 0) {
      best_v[warp] = v;
      best_i[warp] = idx;
    }
    __syncthreads();
    if (warp == 0) {
      v = lane < nwarps ? best_v[lane] : best_v[0];
      idx = lane < nwarps ? best_i[lane] : best_i[0];
      for (int o = 16; o > 0; o /= 2) {
        const T ov = __shfl_xor_sync(kFullMask, v, o);
        const int64_t oi = __shfl_xor_sync(kFullMask, idx, o);
        if (first_is_better<IsMax>(ov, oi, v, idx)) {
          v = ov;
          idx = oi;
        }
      }
      if (lane == 0) {
        indices[m] = idx;
        if (values) values[m] = v;
      }
    }
  }
}

template <bool IsMax, typename T>
__global__ void arg_reduce_columns(const T* in, T* values, int64_t* indices, int64_t M, int64_t R, Dims outer,
                                   Dims inner) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; m < M; m += step) {
    const T* base = in + outer.offset(m);
    T v = base[0];
    int64_t idx = 0;
    for (int64_t r = 1; r < R; ++r) {
      const T x = base[inner.offset(r)];
      if (first_is_better<IsMax>(x, r, v, idx)) {
        v = x;
        idx = r;
      }
    }
    indices[m] = idx;
    if (values) values[m] = v;
  }
}

template <bool IsMax, typename T>
void run_arg(const Tensor& values, const Tensor& indices, const Tensor& in, const Plan& p) {
  if (p.M == 0) return;
  const T* x = static_cast<const T*>(in.raw_data());
  T* v = values.defined() ? static_cast<T*>(values.raw_data()) : nullptr;
  int64_t* i = static_cast<int64_t*>(indices.raw_data());
  if (p.columns) {
    launch(arg_reduce_columns<IsMax, T>, static_cast<unsigned>(std::min<int64_t>((p.M + 127) / 128, kMaxBlocks)), 128,
           0, kernel_stream(), x, v, i, p.M, p.R, p.outer, p.inner);
  } else {
    launch(arg_reduce_rows<IsMax, T>, static_cast<unsigned>(std::min<int64_t>(p.M, kMaxBlocks)), reduce_threads(p.R), 0,
           kernel_stream(), x, v, i, p.M, p.R, p.outer, p.inner);
  }
}

void cuda_arg_reduce(ArgReduceOp op, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t nred) {
  DeviceGuard guard(indices.device());
  const char* name = op == ArgReduceOp::Max ? "argmax" : "argmin";
  const Plan pl = plan(in, nred, name);
  EMBER_CHECK(pl.R > 0, name, ": the reduced size must be nonzero");
  EMBER_DISPATCH_NUMERIC(in.dtype(), name, [&] {
    if (op == ArgReduceOp::Max)
      run_arg<true, scalar_t>(values, indices, in, pl);
    else
      run_arg<false, scalar_t>(values, indices, in, pl);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(reduce_stub, CUDA, cuda_reduce);
EMBER_REGISTER_KERNEL(arg_reduce_stub, CUDA, cuda_arg_reduce);

}  // namespace ember::cuda
