// The reference path of the CPU kernels that autocast runs in float16/bfloat16 (GEMM,
// convolution, the recurrent layers) where no 16-bit kernel of their own exists: widen every
// operand to float32, run the float32 kernel (so products accumulate in float32), and round each
// result back to its 16-bit destination, to nearest even (core/half_bits.h through the copy
// kernel). A native 16-bit kernel replaces a call to these in the same dispatch slot.
#pragma once

#include <cstdint>
#include <vector>

#include "core/copy.h"
#include "core/cpu/capability.h"
#include "core/dtype.h"
#include "core/half_bits.h"
#include "core/tensor.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace lowp {

inline bool is_16bit(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

// A float32 copy of a 16-bit tensor (same shape, contiguous); any other tensor, and an undefined
// one, as it is.
inline Tensor widen(const Tensor& t) {
  if (!t.defined() || !is_16bit(t.dtype())) return t;
  Tensor w = empty(t.shape(), {DType::Float32, t.device()});
  copy_stub.cpu_kernel()(w, t);
  return w;
}

// A float32 tensor to receive a result meant for the 16-bit `dst` (undefined for undefined).
inline Tensor float32_for(const Tensor& dst) {
  if (!dst.defined() || !is_16bit(dst.dtype())) return dst;
  return empty(dst.shape(), {DType::Float32, dst.device()});
}

// Rounds the float32 result `wide` into its 16-bit destination (nothing when they are one).
inline void narrow_into(const Tensor& dst, const Tensor& wide) {
  if (dst.defined() && !dst.is_same(wide)) copy_stub.cpu_kernel()(dst, wide);
}

// Raw buffers for the pointer-based GEMM interface: n 16-bit values at `src` (stride 1) as floats.
inline void to_float(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  if (t == DType::BFloat16)
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(s[i]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(s[i]);
}

inline void from_float(DType t, const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  if (t == DType::BFloat16)
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16_bits(src[i]);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_half_bits(src[i]);
}

}  // namespace lowp
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
