// The kernels of hand_kernels.h. This file is compiled like a kernel file of the profiled emulator
// (tests/CMakeLists.txt gives it the access-hook flags), so its loads and stores are counted.
#include "emu_profile/hand_kernels.h"

#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"

namespace hand {
namespace {

using ember::cuda::launch;

__global__ void copy_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i];
}

__global__ void strided_kernel(const float* in, float* out, int n, int stride) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[static_cast<long>(i) * stride];
}

__global__ void copy_vec4_kernel(const float4* in, float4* out, int n4) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n4) {
    const float4 v = in[i];
    out[i] = make_float4(v.x, v.y, v.z, v.w);
  }
}

template <int kPad>
__global__ void transpose_kernel(const float* in, float* out) {
  EMBER_SHARED(float, tile, [32][32 + kPad]);
  const unsigned x = threadIdx.x, y = threadIdx.y;
  tile[y][x] = in[y * 32 + x];
  __syncthreads();
  out[y * 32 + x] = tile[x][y];
}

__global__ void half_warp_kernel(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n && threadIdx.x % 32 < 16) out[i] = in[i] * 2.0f;
}

__global__ void naive_gemm_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // lanes: rows (wrong way)
  const int col = static_cast<int>(blockIdx.y);
  if (row >= m) return;
  float acc = 0;
  for (int kk = 0; kk < k; ++kk) acc += a[static_cast<long>(row) * k + kk] * b[static_cast<long>(kk) * n + col];
  c[static_cast<long>(row) * n + col] = acc;
}

unsigned blocks(int n, unsigned threads) {
  return static_cast<unsigned>((n + static_cast<int>(threads) - 1) / static_cast<int>(threads));
}

}  // namespace

void copy(const float* in, float* out, int n) {
  launch(copy_kernel, dim3(blocks(n, 256)), dim3(256), 0, nullptr, in, out, n);
}
void strided_read(const float* in, float* out, int n, int stride) {
  launch(strided_kernel, dim3(blocks(n, 256)), dim3(256), 0, nullptr, in, out, n, stride);
}
void copy_vec4(const float* in, float* out, int n) {
  launch(copy_vec4_kernel, dim3(blocks(n / 4, 128)), dim3(128), 0, nullptr, reinterpret_cast<const float4*>(in),
         reinterpret_cast<float4*>(out), n / 4);
}
void transpose_tile(const float* in, float* out, bool padded) {
  if (padded)
    launch(transpose_kernel<1>, dim3(1), dim3(32, 32), 0, nullptr, in, out);
  else
    launch(transpose_kernel<0>, dim3(1), dim3(32, 32), 0, nullptr, in, out);
}
void half_warp_store(const float* in, float* out, int n) {
  launch(half_warp_kernel, dim3(blocks(n, 64)), dim3(64), 0, nullptr, in, out, n);
}
void naive_gemm_uncoalesced(const float* a, const float* b, float* c, int m, int n, int k) {
  launch(naive_gemm_kernel, dim3(blocks(m, 128), static_cast<unsigned>(n)), dim3(128), 0, nullptr, a, b, c, m, n, k);
}

}  // namespace hand
