// CPU dropout: applies a 0/1 uint8 mask and the 1/(1-p) scale in one vectorised pass (the same
// kernel serves the backward, with the same mask). A multiplication rather than a select, as
// PyTorch: a dropped NaN or infinity stays NaN.
#include "core/nn_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

template <typename T>
void apply(const Tensor& out, const Tensor& input, const Tensor& mask, double scale) {
  T* y = static_cast<T*>(out.raw_data());
  const T* x = static_cast<const T*>(input.raw_data());
  const uint8_t* m = static_cast<const uint8_t*>(mask.raw_data());
  const T s = static_cast<T>(scale);
  parallel_for(0, input.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) y[i] = x[i] * (static_cast<T>(m[i]) * s);
  });
}

void cpu_dropout_apply(const Tensor& out, const Tensor& input, const Tensor& mask, double scale) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "dropout", [&] { apply<scalar_t>(out, input, mask, scale); });
}

}  // namespace

EMBER_REGISTER_KERNEL(dropout_apply_stub, CPU, cpu_dropout_apply);

}  // namespace ember
