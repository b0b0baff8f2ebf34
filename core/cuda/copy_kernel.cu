// The device side of copies between CUDA tensors on one GPU: a strided gather/scatter that moves
// raw elements of 1, 2, 4 or 8 bytes (one kernel per width serves every dtype). Conversions
// between dtypes are core/cuda/cast.cu's; copies that cross devices are arranged around both by
// core/cuda/copy.cpp.
#include <algorithm>
#include <cstdint>

#include "core/cuda/copy_kernel.h"
#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/error.h"
#include "core/raw_dispatch.h"

namespace ember::cuda {
namespace {

constexpr int kMaxDims = 12;
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride loops cover the rest

// Shared sizes with each side's strides (elements); dims merged where both sides allow.
struct CopyGeometry {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t dst_strides[kMaxDims];
  int64_t src_strides[kMaxDims];
};

template <typename Word>
__global__ void copy_strided(Word* dst, const Word* src, int64_t n, CopyGeometry g) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rest = i, od = 0, os = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t idx = rest % g.sizes[d];
      rest /= g.sizes[d];
      od += idx * g.dst_strides[d];
      os += idx * g.src_strides[d];
    }
    dst[od] = src[os];
  }
}

CopyGeometry coalesce(const Tensor& dst, const Tensor& src) {
  CopyGeometry g;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    const int64_t size = dst.size(d), ds = dst.stride(d), ss = src.stride(d);
    if (size == 1) continue;
    if (g.ndim > 0 && g.dst_strides[g.ndim - 1] == ds * size && g.src_strides[g.ndim - 1] == ss * size) {
      g.sizes[g.ndim - 1] *= size;
      g.dst_strides[g.ndim - 1] = ds;
      g.src_strides[g.ndim - 1] = ss;
      continue;
    }
    EMBER_CHECK(g.ndim < kMaxDims, "copy_: CUDA tensors support at most ", kMaxDims, " non-mergeable dims, got ",
                dst.dim());
    g.sizes[g.ndim] = size;
    g.dst_strides[g.ndim] = ds;
    g.src_strides[g.ndim] = ss;
    ++g.ndim;
  }
  return g;
}

template <typename Word>
void launch_copy(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  launch(copy_strided<Word>, blocks, kThreads, 0, kernel_stream(), static_cast<Word*>(dst.raw_data()),
         static_cast<const Word*>(src.raw_data()), n, coalesce(dst, src));
}

}  // namespace

void copy_same_dtype_on_device(const Tensor& dst, const Tensor& src) {
  EMBER_CHECK(dst.dtype() == src.dtype() && dst.shape() == src.shape() && dst.device() == src.device(),
              "copy_same_dtype_on_device: operands differ in dtype, shape or device");
  if (dst.numel() == 0) return;
  dispatch_raw(dst.itemsize(), "copy_", [&](auto tag) { launch_copy<decltype(tag)>(dst, src); });
}

}  // namespace ember::cuda
