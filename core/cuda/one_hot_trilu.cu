// CUDA one_hot and tril/triu (core/index_kernels.h): both write every element of a contiguous
// output from its own position, one thread per element in a grid-stride loop. one_hot compares
// the column with the row's label (the op has checked the labels' range). tril/triu keeps the
// element when its column minus its row is on the kept side of the diagonal and writes zero
// otherwise (all bits zero in every dtype, so elements move as raw bits); the input may be
// strided, read through an offset calculator over its shape.
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/launch.h"
#include "core/index_kernels.h"
#include "core/raw_dispatch.h"

namespace ember::cuda {
namespace {

__global__ void one_hot_kernel(int64_t* out, const int64_t* labels, int64_t n, int64_t classes) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step)
    out[e] = labels[e / classes] == e % classes ? 1 : 0;
}

void cuda_one_hot(const Tensor& out, const Tensor& labels) {
  const int64_t n = out.numel(), classes = out.size(-1);
  if (n == 0) return;
  DeviceGuard guard(out.device());
  launch(one_hot_kernel, map_blocks(n), kMapThreads, 0, kernel_stream(), static_cast<int64_t*>(out.raw_data()),
         static_cast<const int64_t*>(labels.raw_data()), n, classes);
}

// Element e of out is (row i, column j) of its matrix; calc walks a's shape in the same order.
template <typename R>
__global__ void trilu_kernel(R* out, const R* a, OffsetCalc<1> calc, int64_t n, int64_t rows, int64_t cols,
                             int64_t diagonal, bool upper) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    // j - i cannot overflow (both are below the dims' sizes); i + diagonal could.
    const bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
    if (keep) {
      int64_t off;
      calc.get(e, &off);
      out[e] = a[off];
    } else {
      out[e] = R{0};
    }
  }
}

void cuda_trilu(const Tensor& out, const Tensor& a, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const Tensor* ts[1] = {&a};
  const OffsetCalc<1> calc = make_offset_calc<1>(ts);
  dispatch_raw(a.itemsize(), upper ? "triu" : "tril", [&](auto tag) {
    using R = decltype(tag);
    launch(trilu_kernel<R>, map_blocks(n), kMapThreads, 0, kernel_stream(), static_cast<R*>(out.raw_data()),
           static_cast<const R*>(a.raw_data()), calc, n, a.size(-2), a.size(-1), diagonal, upper);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(one_hot_stub, CUDA, cuda_one_hot);
EMBER_REGISTER_KERNEL(trilu_stub, CUDA, cuda_trilu);

}  // namespace ember::cuda
