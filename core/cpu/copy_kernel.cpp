#include <algorithm>
#include <cstring>

#include "core/copy.h"
#include "core/cpu/bf16_gemm.h"
#include "core/cpu/loops.h"
#include "core/raw_dispatch.h"

namespace ember {

namespace {

// float32 <-> bfloat16 between contiguous tensors: the vectorised conversions of
// core/cpu/bf16_gemm.h (vcvtne2ps2bf16 at avx512bf16), the same bits as the element loop below.
bool copy_bf16_contiguous(const Tensor& dst, const Tensor& src) {
  if (!dst.is_contiguous() || !src.is_contiguous()) return false;
  const bool narrow = dst.dtype() == DType::BFloat16 && src.dtype() == DType::Float32;
  const bool widen = dst.dtype() == DType::Float32 && src.dtype() == DType::BFloat16;
  if (!narrow && !widen) return false;
  parallel_for(0, dst.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
    if (narrow)
      cpu::bf16_from_float(static_cast<const float*>(src.raw_data()) + b, static_cast<uint16_t*>(dst.raw_data()) + b,
                           e - b);
    else
      cpu::bf16_to_float(static_cast<const uint16_t*>(src.raw_data()) + b, static_cast<float*>(dst.raw_data()) + b,
                         e - b);
  });
  return true;
}

void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (copy_bf16_contiguous(dst, src)) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    const int64_t nbytes = dst.numel() * static_cast<int64_t>(dst.itemsize());
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    if (s == d) return;
    parallel_for(0, nbytes, kParallelGrain * 32,
                 [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, static_cast<size_t>(e - b)); });
    return;
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && dst.numel() > 0) {
    // One contiguous block of the source repeated along leading dims of stride 0 (a bias broadcast
    // over rows, as addmm copies it): a memcpy per repetition. The elementwise walk below sets up
    // a run per row, which for rows of a few dozen elements costs more than the copying.
    const Shape& shape = dst.shape();
    const Shape& stride = src.strides();
    int64_t k = dst.dim(), block = 1;
    while (k > 0 && (shape[k - 1] == 1 || stride[k - 1] == block)) block *= shape[--k];
    bool repeated = k > 0;
    for (int64_t i = 0; i < k && repeated; ++i) repeated = stride[i] == 0 || shape[i] == 1;
    const size_t bytes = static_cast<size_t>(block) * dst.itemsize();
    const int64_t reps = dst.numel() / block;
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    const bool overlaps = s + bytes > d && s < d + reps * static_cast<int64_t>(bytes);
    if (repeated && bytes >= 64 && !overlaps) {  // a block worth a call, and no aliasing
      parallel_for(0, reps, std::max<int64_t>(1, kParallelGrain * 32 / static_cast<int64_t>(bytes)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t r = b; r < e; ++r) std::memcpy(d + r * bytes, s, bytes);
                   });
      return;
    }
  }
  if (dst.dtype() == src.dtype()) {
    // Same dtype: move raw bits (a round trip through float would canonicalise float16 NaNs).
    dispatch_raw(dst.itemsize(), "copy", [&](auto tag) {
      using R = decltype(tag);
      cpu::map1<R, R>(dst, src, [](R v) { return v; });
    });
    return;
  }
  EMBER_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(src.dtype(), "copy", [&] {
      using From = scalar_t;
      cpu::map1<To, From>(dst, src, [](From v) { return cast_value<To>(v); });
    });
  });
}

void cpu_fill(const Tensor& dst, double value) {
  // Writes without reading the destination: fresh memory may hold any bit pattern, and reading
  // it (even to overwrite) is undefined for bool.
  EMBER_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    const scalar_t v = cast_value<scalar_t>(value);
    std::array<const Tensor*, 1> ops{&dst};
    std::array<char*, 1> base{static_cast<char*>(dst.raw_data())};
    cpu::for_each_run<1>(dst.shape(), ops, base, [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
      scalar_t* o = reinterpret_cast<scalar_t*>(p[0]);
      if (s[0] == 1) {
        std::fill(o, o + n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * s[0]] = v;
      }
    });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(copy_stub, CPU, cpu_copy);
EMBER_REGISTER_KERNEL(fill_stub, CPU, cpu_fill);

}  // namespace ember
