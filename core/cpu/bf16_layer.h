// How a CPU layer kernel without bfloat16 code of its own (convolution, the recurrent layers)
// takes bfloat16 tensors: it widens them to float32, runs its float32 code with its GEMMs in
// bfloat16 (ConvGeometry::bf16_gemms, RnnConfig::bf16_gemms: the products that carry the FLOPs go
// through vdpbf16ps where the CPU has it), and rounds each result back to nearest even.
#pragma once

#include "core/copy.h"
#include "core/cpu/capability.h"
#include "core/tensor.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace bf16_layer {

// A float32 copy of a bfloat16 tensor (same shape, contiguous); any other tensor, and an undefined
// one, as it is.
inline Tensor widened(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::BFloat16) return t;
  Tensor w = empty(t.shape(), {DType::Float32, t.device()});
  copy_stub.cpu_kernel()(w, t);
  return w;
}

// A float32 tensor to receive a result meant for the bfloat16 `dst`; any other `dst` as it is.
inline Tensor float_scratch(const Tensor& dst) {
  if (!dst.defined() || dst.dtype() != DType::BFloat16) return dst;
  return empty(dst.shape(), {DType::Float32, dst.device()});
}

// Rounds `wide` into its bfloat16 destination (nothing when they are one tensor).
inline void round_into(const Tensor& dst, const Tensor& wide) {
  if (dst.defined() && !dst.is_same(wide)) copy_stub.cpu_kernel()(dst, wide);
}

}  // namespace bf16_layer
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
