#include "core/copy.h"
#include "core/cpu/loops.h"

namespace ember {

EMBER_DEFINE_STUB(copy_stub, CopyFn);
EMBER_DEFINE_STUB(fill_stub, FillFn);

namespace {

void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    const int64_t nbytes = dst.numel() * static_cast<int64_t>(dst.itemsize());
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    if (s == d) return;
    parallel_for(0, nbytes, kParallelGrain * 32,
                 [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, static_cast<size_t>(e - b)); });
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
  EMBER_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    const scalar_t v = cast_value<scalar_t>(value);
    cpu::map1<scalar_t, scalar_t>(dst, dst, [v](scalar_t) { return v; });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(copy_stub, CPU, cpu_copy);
EMBER_REGISTER_KERNEL(fill_stub, CPU, cpu_fill);

}  // namespace ember
