// The CUDA fill_ kernel: writes one value into every element of a CUDA tensor of any dtype and
// layout. The value is converted on the host and written as raw bits, so one kernel per element
// width (1, 2, 4, 8 bytes) serves every dtype, float16/bfloat16 included.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/copy.h"
#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/cuda/strided_dims.h"
#include "core/raw_dispatch.h"

namespace ember::cuda {
namespace {

constexpr int kMaxDims = 16;
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

// Sizes and strides (in elements) of a strided tensor, passed to the kernel by value.
using Geometry = StridedDims<kMaxDims>;

template <typename Word>
__global__ void fill_contiguous(Word* __restrict__ out, Word value, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) out[i] = value;
}

template <typename Word>
__global__ void fill_strided(Word* out, Word value, int64_t n, Geometry g) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[g.offset(i)] = value;
  }
}

// Drops size-1 dims and merges dims that are contiguous with each other, so that most views
// (a slice of rows, a contiguous tensor) reach the kernel as one or two dims.
Geometry coalesce(const Tensor& t) {
  Geometry g;
  EMBER_CHECK(coalesce_dims(t, 0, t.dim(), -1, &g), "fill_: CUDA tensors support at most ", kMaxDims,
              " non-mergeable dims, got ", t.dim());
  return g;
}

template <typename Word>
void launch_fill(const Tensor& dst, const void* value_bits) {
  Word value;
  std::memcpy(&value, value_bits, sizeof(Word));
  const int64_t n = dst.numel();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  Word* out = static_cast<Word*>(dst.raw_data());
  const Geometry g = coalesce(dst);
  cudaStream_t stream = kernel_stream();
  if (g.n == 0 || (g.n == 1 && g.stride[0] == 1)) {
    launch(fill_contiguous<Word>, blocks, kThreads, 0, stream, out, value, n);
  } else {
    launch(fill_strided<Word>, blocks, kThreads, 0, stream, out, value, n, g);
  }
}

void cuda_fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  unsigned char bits[8] = {};
  EMBER_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    const scalar_t v = cast_value<scalar_t>(value);
    std::memcpy(bits, &v, sizeof v);
  });
  DeviceGuard guard(dst.device());
  dispatch_raw(dst.itemsize(), "fill_", [&](auto tag) { launch_fill<decltype(tag)>(dst, bits); });
}

}  // namespace

EMBER_REGISTER_KERNEL(fill_stub, CUDA, cuda_fill);

}  // namespace ember::cuda
