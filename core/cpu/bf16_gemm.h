// bfloat16 matrix products and conversions on the CPU (core/cpu/bf16_gemm.cpp), one copy per CPU
// capability level like every cpu/ file. At the avx512bf16 level they run AVX512-BF16 code:
// vdpbf16ps, which multiplies pairs of bfloat16 values and adds both products to a float32
// lane (32 multiply-adds per instruction against an FMA's 16), and vcvtne2ps2bf16 for the
// conversions. Below it they are correct but not fast: the operands are widened to float32 and
// multiplied by SGEMM, which is what a CPU without AVX512-BF16 can do best.
#pragma once

#include <cstdint>

#include "core/cpu/capability.h"
#include "core/gemm_kernels.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

// dst[i] = src[i] rounded to the nearest bfloat16, ties to even; NaN stays NaN with its sign and
// the top of its payload, made quiet; subnormals round like any other value (core/half_bits.h's
// float_to_bf16_bits, bit for bit).
void bf16_from_float(const float* src, uint16_t* dst, int64_t n);
// dst[i] = src[i] widened (exact).
void bf16_to_float(const uint16_t* src, float* dst, int64_t n);

// One GEMM with g.dtype bfloat16 (core/gemm_kernels.h: A and B bfloat16, C bfloat16 or, with
// g.c_float32, float32). Sizes must fit the 32-bit BLAS interface (the caller checks).
// At the avx512bf16 level vdpbf16ps treats bfloat16 subnormal inputs as zero (as the instruction
// defines); the products are otherwise those of the widened operands, summed in float32.
void gemm_bf16(const GemmArgs& g);

// C = alpha op(A) op(B) + beta C on float32 matrices, with A and B rounded to bfloat16 and
// multiplied by gemm_stub's bfloat16 GEMM at the level in force (so a layer compiled only up to
// avx512 still reaches the avx512bf16 kernel). What a bfloat16 convolution or recurrent layer,
// computed in float32 otherwise, runs its GEMMs with (ConvGeometry::bf16_gemms,
// RnnConfig::bf16_gemms). Products too shallow to gain (k < kBf16MinK: rounding and packing cost
// more than the k-pairs save, as in the Winograd GEMMs of 32 channels) run SGEMM on the float32
// operands unrounded, at every level alike.
inline constexpr int64_t kBf16MinK = 64;
void sgemm_as_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
