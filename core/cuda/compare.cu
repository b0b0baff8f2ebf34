// CUDA kernels for the selecting and testing elementwise families: comparisons, logical ops, where
// and isclose (core/elementwise_kernels.h), and masked_fill (core/index_kernels.h). All of them
// go through the elementwise machinery of core/cuda/elementwise_loops.h (operands arrive
// broadcast to the output's shape). Their results must equal the CPU kernels' bit for bit:
// comparisons are exact in every dtype (float16 and bfloat16 compare their float values, as on
// the CPU, so NaN is unequal to everything and -0 == +0), and where/masked_fill move raw element
// bits (one kernel per element width, like the CPU's blend), so NaN payloads and -0 survive.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/copy.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"
#include "core/elementwise_kernels.h"
#include "core/index_kernels.h"
#include "core/raw_dispatch.h"

namespace ember::cuda {
namespace {

// map() with 16-byte vector loads also when the element sizes differ, as for a bool output of
// float operands: W = 16 bytes / the widest element, so the widest operand moves 16 bytes per
// load and the narrower ones W elements. map() vectorises only operands of one size (and does so
// itself), and takes anything not contiguous or not aligned to its Vec.
template <typename Out, typename... In, typename F, typename... Ts>
void map_mixed(F f, const Tensor& out, const Ts&... ins) {
  constexpr bool same_size = ((sizeof(In) == sizeof(Out)) && ...);
  if constexpr (!same_size) {
    constexpr int W = static_cast<int>(16 / std::max({sizeof(Out), sizeof(In)...}));
    auto aligned = [](const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; };
    const int64_t n = out.numel();
    if (n > 0 && out.is_contiguous() && (ins.is_contiguous() && ...) && aligned(out.raw_data(), alignof(Vec<Out, W>)) &&
        (aligned(ins.raw_data(), alignof(Vec<In, W>)) && ...)) {
      launch(map_vectorized<W, F, Out, In...>, map_blocks((n + W - 1) / W), kMapThreads, 0, kernel_stream(), f, n,
             static_cast<Out*>(out.raw_data()), static_cast<const In*>(ins.raw_data())...);
      return;
    }
  }
  map<Out, In...>(f, out, ins...);
}

// ------------------------------------------------------------------ comparisons
template <typename T>
struct CompareF {
  CompareOp op;
  template <typename U>
  EMBER_DEVICE bool apply(U x, U y) const {
    switch (op) {
      case CompareOp::Eq:
        return x == y;
      case CompareOp::Ne:
        return x != y;
      case CompareOp::Lt:
        return x < y;
      case CompareOp::Le:
        return x <= y;
      case CompareOp::Gt:
        return x > y;
      case CompareOp::Ge:
        return x >= y;
    }
    return false;
  }
  EMBER_DEVICE bool operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, HalfBits> || std::is_same_v<T, BF16Bits>)
      return apply(to_float(x), to_float(y));  // the CPU compares their float values too
    else
      return apply(x, y);
  }
};

void cuda_compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_ALL(a.dtype(), "comparison", [&] {
    using T = kernel_t<scalar_t>;
    map_mixed<bool, T, T>(CompareF<T>{op}, out, a, b);
  });
}

// ------------------------------------------------------------------ logical
struct LogicalF {
  LogicalOp op;
  EMBER_DEVICE bool operator()(bool x, bool y) const { return op == LogicalOp::And ? (x && y) : (x || y); }
};
struct NotF {
  EMBER_DEVICE bool operator()(bool x) const { return !x; }
};

void cuda_logical(LogicalOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  DeviceGuard guard(out.device());
  if (op == LogicalOp::Not) {
    map<bool, bool>(NotF{}, out, a);  // b is unused (and may be anything)
    return;
  }
  map<bool, bool, bool>(LogicalF{op}, out, a, b);
}

// ------------------------------------------------------------------ where and masked_fill
template <typename R>
struct SelectF {
  EMBER_DEVICE R operator()(bool c, R x, R y) const { return c ? x : y; }
};

// where with one side a broadcast scalar (masked_fill_, the zeros of where's backward): the
// scalar lives in device memory, so each thread reads it (one cached address) instead of the
// host copying it back; the other side keeps its layout, so a contiguous one gets vector loads.
template <typename R>
struct SelectScalarF {
  const R* scalar;
  bool scalar_when;  // the value of cond that picks the scalar
  EMBER_DEVICE R operator()(bool c, R y) const { return c == scalar_when ? *scalar : y; }
};

// masked_fill: the fill value comes from the host, already converted to the dtype.
template <typename R>
struct FillF {
  R value;
  EMBER_DEVICE R operator()(bool m, R x) const { return m ? value : x; }
};

// True when every element of t is one memory location.
bool is_broadcast_scalar(const Tensor& t) {
  for (int64_t s : t.strides())
    if (s != 0) return false;
  return true;
}

void cuda_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device());
  dispatch_raw(out.itemsize(), "where", [&](auto tag) {
    using R = decltype(tag);
    if (is_broadcast_scalar(a))
      map_mixed<R, bool, R>(SelectScalarF<R>{static_cast<const R*>(a.raw_data()), true}, out, cond, b);
    else if (is_broadcast_scalar(b))
      map_mixed<R, bool, R>(SelectScalarF<R>{static_cast<const R*>(b.raw_data()), false}, out, cond, a);
    else
      map_mixed<R, bool, R, R>(SelectF<R>{}, out, cond, a, b);
  });
}

void cuda_masked_fill(const Tensor& out, const Tensor& a, const Tensor& mask, double value) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_ALL(out.dtype(), "masked_fill", [&] {
    // The value converted on the host exactly as the CPU kernel does, then moved as raw bits.
    const scalar_t v = cast_value<scalar_t>(value);
    dispatch_raw(sizeof(scalar_t), "masked_fill", [&](auto tag) {
      using R = decltype(tag);
      if constexpr (sizeof(R) == sizeof(scalar_t)) {
        R bits;
        std::memcpy(&bits, &v, sizeof(R));
        map_mixed<R, bool, R>(FillF<R>{bits}, out, mask, a);
      }
    });
  });
}

// ------------------------------------------------------------------ isclose
template <typename T>
struct IsCloseF {
  T rtol, atol;
  EMBER_DEVICE bool operator()(T x, T y) const {
    // The CPU kernel's expression: NaN is never close, nor is an infinite difference (inf vs -inf).
    const T d = d_fabs(x - y);
    return x == y || (d <= atol + rtol * d_fabs(y) && d < d_infinity<T>());
  }
};

void cuda_isclose(const Tensor& out, const Tensor& a, const Tensor& b, double rtol, double atol) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(a.dtype(), "isclose", [&] {
    using T = scalar_t;
    map_mixed<bool, T, T>(IsCloseF<T>{static_cast<T>(rtol), static_cast<T>(atol)}, out, a, b);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(compare_stub, CUDA, cuda_compare);
EMBER_REGISTER_KERNEL(logical_stub, CUDA, cuda_logical);
EMBER_REGISTER_KERNEL(where_stub, CUDA, cuda_where);
EMBER_REGISTER_KERNEL(isclose_stub, CUDA, cuda_isclose);
EMBER_REGISTER_KERNEL(masked_fill_stub, CUDA, cuda_masked_fill);

}  // namespace ember::cuda
