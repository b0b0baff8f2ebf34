// GEMM on CUDA: the chooser registered as gemm_stub's and gemm_batched_stub's CUDA kernel, and
// cuBLAS as the vendor implementation. Ember's matrices are row-major; cuBLAS is column-major,
// and a row-major X with leading dimension ld is the column-major X^T with the same ld, so
// C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands swap and keep their
// transpose flags. Ran on a lent H200 (2026-12-04: the op table's cuda_vendor rows, bench_gpu);
// scripts/gpu-check.sh checks it against the CPU each time.
#include <climits>
#include <functional>
#include <string>
#include <unordered_map>

#include "core/cuda/cublas_api.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_count.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/gemm_geometry.h"
#include "core/cuda/native_kernels.h"
#include "core/gemm_kernels.h"
#include "core/kernel_choice.h"

namespace ember::cuda {
namespace {

int as_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT_MAX, "gemm (cuBLAS): ", what, " = ", v, " does not fit cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

// The GPU that C lives on. With one GPU there is nothing to ask: cudaPointerGetAttributes is a
// driver call, once per GEMM otherwise. With several, C's pointer says.
int gemm_device(const void* c) {
  if (physical_device_count() == 1) return 0;
  return device_of_pointer(c);
}

// What cuBLAS runs here: float32, float64, and bfloat16 or float16 operands (not float32 ones
// rounded on the way: ab_float32) with float32 accumulation and a 16-bit or float32 C.
bool cublas_takes(const GemmArgs& g) {
  const bool half = g.dtype == DType::BFloat16 || g.dtype == DType::Float16;
  return g.dtype == DType::Float32 || g.dtype == DType::Float64 || (half && !g.ab_float32);
}

// bfloat16 or float16 through cublasGemmEx, in the column-major transposition the float paths use
// (C^T = B^T A^T); alpha and beta are float, as the float32 compute type wants.
void cublas_gemm_16bit(const CublasApi& api, cublasHandle_t h, const GemmArgs& g, int count, int64_t sa, int64_t sb,
                       int64_t sc) {
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
  const int lda = as_int(g.lda, "lda"), ldb = as_int(g.ldb, "ldb"), ldc = as_int(g.ldc, "ldc");
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const cudaDataType_t t = g.dtype == DType::Float16 ? CUDA_R_16F : CUDA_R_16BF;
  const cudaDataType_t ct = g.c_float32 ? CUDA_R_32F : t;
  if (count == 1)
    EMBER_CUBLAS_CHECK(api.gemm_ex(h, op_b, op_a, n, m, k, &alpha, g.b, t, ldb, g.a, t, lda, &beta, g.c, ct, ldc,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    EMBER_CUBLAS_CHECK(api.gemm_strided_batched_ex(h, op_b, op_a, n, m, k, &alpha, g.b, t, ldb, sb, g.a, t, lda, sa,
                                                   &beta, g.c, ct, ldc, sc, count, CUBLAS_COMPUTE_32F,
                                                   CUBLAS_GEMM_DEFAULT));
}

void cublas_gemm_batched(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  EMBER_CHECK(cublas_takes(g), "gemm (cuBLAS): dtype ", g.dtype, g.ab_float32 ? " with float32 operands" : "",
              " is not supported (float32, float64, bfloat16, float16)");
  const CublasApi& api = cublas_api();
  const int dev = gemm_device(g.c);
  DeviceGuard guard(Device::cuda(dev));
  cublasHandle_t h = cublas_handle(dev, raw(current_stream(dev)));
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = as_int(g.m, "m"), n = as_int(g.n, "n"), k = as_int(g.k, "k");
  const int lda = as_int(g.lda, "lda"), ldb = as_int(g.ldb, "ldb"), ldc = as_int(g.ldc, "ldc");
  const int count = as_int(batch, "batch");
  if (g.dtype == DType::BFloat16 || g.dtype == DType::Float16) {
    cublas_gemm_16bit(api, h, g, count, sa, sb, sc);
  } else if (g.dtype == DType::Float32) {
    const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
    auto a = static_cast<const float*>(g.a), b = static_cast<const float*>(g.b);
    auto c = static_cast<float*>(g.c);
    if (batch == 1) {
      EMBER_CUBLAS_CHECK(api.sgemm(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    } else {
      EMBER_CUBLAS_CHECK(
          api.sgemm_strided_batched(h, op_b, op_a, n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c, ldc, sc, count));
    }
  } else {
    const double alpha = g.alpha, beta = g.beta;
    auto a = static_cast<const double*>(g.a), b = static_cast<const double*>(g.b);
    auto c = static_cast<double*>(g.c);
    if (batch == 1) {
      EMBER_CUBLAS_CHECK(api.dgemm(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    } else {
      EMBER_CUBLAS_CHECK(
          api.dgemm_strided_batched(h, op_b, op_a, n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c, ldc, sc, count));
    }
  }
}

// The kernel selector's key for a GEMM shape. Formatted once per shape and thread, not per call:
// a training step runs the same few shapes thousands of times.
struct GemmShape {
  DType dtype;
  bool ta, tb;
  int64_t m, n, k, batch;
  bool operator==(const GemmShape&) const = default;
};
struct GemmShapeHash {
  size_t operator()(const GemmShape& s) const {
    size_t h = static_cast<size_t>(s.dtype) * 4 + (s.ta ? 2 : 0) + (s.tb ? 1 : 0);
    for (int64_t v : {s.m, s.n, s.k, s.batch}) h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

const std::string& gemm_key(const GemmArgs& g, int64_t batch) {
  thread_local std::unordered_map<GemmShape, std::string, GemmShapeHash> keys;
  // Bounded: shapes that vary from call to call (sequence lengths) must not grow it forever.
  if (keys.size() >= 4096) keys.clear();
  auto [it, fresh] = keys.try_emplace(GemmShape{g.dtype, g.trans_a, g.trans_b, g.m, g.n, g.k, batch});
  if (fresh)
    it->second = ::ember::detail::concat(dtype_name(g.dtype), " ", g.trans_a ? "T" : "N", g.trans_b ? "T" : "N",
                                         " m=", g.m, " n=", g.n, " k=", g.k, " batch=", batch);
  return it->second;
}

KernelTimer timer_for(int dev) {
  return [dev](const std::function<void()>& fn) { return time_on_stream(dev, fn); };
}

void cuda_gemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  // The stub carries no device: C's pointer says which GPU, made current for the native kernel.
  const int dev = gemm_device(g.c);
  DeviceGuard guard(Device::cuda(dev));
  const NativeKernel<GemmFn> native = native_kernel(gemm_stub, KernelFamily::Gemm);
  // A shape the native kernel cannot run (too large for its grid or 32-bit coordinates) is not
  // available to it, so every choice, `auto` included, runs cuBLAS instead of failing.
  KernelCandidate nat{native.fn != nullptr && native_gemm_fits(g.m, g.n, g.k, 1), native.deterministic,
                      [&] { native.fn(g); }};
  KernelCandidate ven{cublas_available() && cublas_takes(g), true, [&] { cublas_gemm_batched(g, 1, 0, 0, 0); }};
  // beta != 0 accumulates into C, so running it twice to time it would change the result.
  kernel_selector().run(KernelFamily::Gemm, gemm_key(g, 1), nat, ven, timer_for(dev), g.beta == 0.0);
}

void cuda_gemm_batched(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (g.m == 0 || g.n == 0 || batch == 0) return;
  const int dev = gemm_device(g.c);
  DeviceGuard guard(Device::cuda(dev));
  const NativeKernel<GemmBatchedFn> native = native_kernel(gemm_batched_stub, KernelFamily::Gemm);
  KernelCandidate nat{native.fn != nullptr && native_gemm_fits(g.m, g.n, g.k, batch), native.deterministic,
                      [&] { native.fn(g, batch, sa, sb, sc); }};
  KernelCandidate ven{cublas_available() && cublas_takes(g), true, [&] { cublas_gemm_batched(g, batch, sa, sb, sc); }};
  kernel_selector().run(KernelFamily::Gemm, gemm_key(g, batch), nat, ven, timer_for(dev), g.beta == 0.0);
}

}  // namespace

// Exposed for bench/gpu and the GPU tests, which compare the two implementations directly.
void vendor_gemm(const GemmArgs& g) {
  cublas_gemm_batched(g, 1, 0, 0, 0);
}

EMBER_REGISTER_KERNEL(gemm_stub, CUDA, cuda_gemm);
EMBER_REGISTER_KERNEL(gemm_batched_stub, CUDA, cuda_gemm_batched);

namespace {
[[maybe_unused]] const bool vendor_registered = [] {
  register_vendor(KernelFamily::Gemm);
  return true;
}();
}  // namespace

}  // namespace ember::cuda
