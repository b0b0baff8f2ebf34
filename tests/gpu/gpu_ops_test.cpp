// The GPU test label: what only a GPU can check beyond the op table (tests/ops, which runs every
// op on cuda:0 with the native and the vendor kernels): round trips and casts of every dtype,
// the allocator, out-of-memory errors, special values bit for bit, sort/topk bit for bit, sizes
// past 2^31 and 65535 tiles, deferred errors, streams and graphs, the multi-tensor optimizer
// step. Without a GPU every test skips and the program prints "skipped: no CUDA device" (ctest
// reports it as skipped, tests/CMakeLists.txt).
#include <ember/config.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/copy.h"
#include "core/elementwise_kernels.h"
#include "core/gemm_kernels.h"
#include "core/generator.h"
#include "core/index_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"
#include "core/ops.h"
#include "core/reduce_kernels.h"
#include "core/rnn_kernels.h"
#include "core/stream.h"
#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#if EMBER_GPU_TESTS_HAVE_LAYERS
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#endif

using namespace ember;

namespace {

bool have_gpu() {
  return cuda_device_count() > 0;
}

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// Max |a - b| relative to b's magnitude (absolute below magnitude 1).
double rel_err(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return INFINITY;
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::abs(x[i] - y[i]));
  return e / std::max(1.0, max_abs(b));
}

TEST(GpuRuntime, RoundTripsEveryDtypeThroughTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool,
                   DType::Float16, DType::BFloat16}) {
    Tensor a = arange(0, 60, 1, {.dtype = DType::Float32}).reshape({3, 4, 5}).to(dt);
    Tensor back = a.to(Device::cuda(0)).to(Device::cpu());
    EXPECT_EQ(back.to_vector<double>(), a.to_vector<double>()) << dt;
    // Strided views both ways, and a dtype change on the way.
    Tensor v = a.to(Device::cuda(0)).transpose(0, 2).to(Device::cpu(), DType::Float64);
    EXPECT_EQ(v.to_vector<double>(), a.transpose(0, 2).to(DType::Float64).to_vector<double>()) << dt;
  }
}

// A dtype change on the device (cast.cu) for every pair, float16/bfloat16 included, from a
// strided view: bit for bit what the CPU's conversion gives.
TEST(GpuRuntime, CastsEveryDtypePairOnTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                  DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  Tensor base = (randn({3, 4, 5}) * 40.0).to(DType::Float64);
  for (DType from : all) {
    Tensor a = base.to(from);
    Tensor dev = a.to(Device::cuda(0)).transpose(0, 2);
    for (DType to : all) {
      Tensor got = dev.to(to).to(Device::cpu());
      Tensor want = a.transpose(0, 2).to(to);
      EXPECT_EQ(got.to(DType::Float64).to_vector<double>(), want.to(DType::Float64).to_vector<double>())
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(GpuRuntime, AllocatorCachesAcrossTrainingLikeSteps) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Allocator* a = get_allocator(Device::cuda(0));
  for (int i = 0; i < 3; ++i) Tensor x = empty({1024, 1024}, {.device = Device::cuda(0)});
  const int64_t os = a->stats().os_allocations;
  for (int i = 0; i < 20; ++i) Tensor x = empty({1024, 1024}, {.device = Device::cuda(0)});
  EXPECT_EQ(a->stats().os_allocations, os);
}

TEST(GpuRuntime, OutOfMemoryIsAnErrorNamingTheSizes) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  try {
    Tensor huge = empty({int64_t{1} << 40}, {.device = Device::cuda(0)});  // 4 TiB
    FAIL() << "allocated 4 TiB";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0: out of memory allocating 4398046511104 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes in use"), std::string::npos) << msg;
  }
}

// Comparisons, where and masked_fill on NaN of both signs, infinities, signed zeros and
// subnormals, in every dtype, bit for bit against the CPU (a GPU that flushed subnormals or
// canonicalised NaN would differ here), and allclose on both devices.
TEST(GpuCompare, SpecialValuesCompareAndSelectBitForBitLikeTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const std::vector<double> pool = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 1e-310, 3e-6, 1.0, -2.5};
  const int64_t n = static_cast<int64_t>(pool.size());
  // Every pair of pool values: a[i, j] = pool[i], b[i, j] = pool[j].
  const Tensor a64 = from_vector(pool, {n, 1}).expand({n, n}).contiguous();
  const Tensor b64 = from_vector(pool, {1, n}).expand({n, n}).contiguous();
  const Tensor cond = ne(randint(0, 2, {n, n}), 0);
  auto same_bits = [](const Tensor& gpu, const Tensor& cpu) {
    const Tensor g = gpu.cpu().contiguous(), c = cpu.contiguous();
    return g.dtype() == c.dtype() && g.shape() == c.shape() &&
           std::memcmp(g.raw_data(), c.raw_data(), static_cast<size_t>(c.numel()) * c.itemsize()) == 0;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor a = a64.to(dt), b = b64.to(dt);
    const Tensor ag = a.to(Device::cuda(0)), bg = b.to(Device::cuda(0)), cg = cond.to(Device::cuda(0));
    EXPECT_TRUE(same_bits(eq(ag, bg), eq(a, b))) << dtype_name(dt) << " eq";
    EXPECT_TRUE(same_bits(ne(ag, bg), ne(a, b))) << dtype_name(dt) << " ne";
    EXPECT_TRUE(same_bits(lt(ag, bg), lt(a, b))) << dtype_name(dt) << " lt";
    EXPECT_TRUE(same_bits(ge(ag, bg), ge(a, b))) << dtype_name(dt) << " ge";
    EXPECT_TRUE(same_bits(where(cg, ag, bg), where(cond, a, b))) << dtype_name(dt) << " where";
    EXPECT_TRUE(same_bits(masked_fill(ag, cg, -NAN), masked_fill(a, cond, -NAN))) << dtype_name(dt) << " masked_fill";
    Tensor ac = a.clone(), acg = ag.clone();
    masked_fill_(ac, cond, -0.0);
    masked_fill_(acg, cg, -0.0);
    EXPECT_TRUE(same_bits(acg, ac)) << dtype_name(dt) << " masked_fill_";
  }
  for (double atol : {0.0, 1e-8, 3.0}) {
    const Tensor ag = a64.to(Device::cuda(0)), bg = b64.to(Device::cuda(0));
    EXPECT_EQ(allclose(ag, ag, 1e-5, atol), allclose(a64, a64, 1e-5, atol)) << atol;  // false: NaN
    EXPECT_EQ(allclose(ag, bg, 1e-5, atol), allclose(a64, b64, 1e-5, atol)) << atol;
  }
  // Near in relative terms: x + 1e-7 was near only where |x| > 0.009 (atol 1e-8 + rtol 1e-5 |y|),
  // so about half of all draws of 100 normals failed it on the GPU and the CPU alike.
  const Tensor x = randn({100}), y = mul(x, 1 + 1e-6);
  EXPECT_TRUE(allclose(x.to(Device::cuda(0)), y.to(Device::cuda(0))));
  EXPECT_TRUE(allclose(x, y));
  EXPECT_FALSE(allclose(x.to(Device::cuda(0)), add(y, 1e-2).to(Device::cuda(0))));
}

// Each family with a vendor implementation also has Ember's own kernel; otherwise the "native"
// half of the op table silently ran the vendor path.
TEST(GpuRuntime, EveryFamilyHasANativeKernel) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (KernelFamily f :
       {KernelFamily::Gemm, KernelFamily::Conv, KernelFamily::Pool, KernelFamily::BatchNorm, KernelFamily::Rnn})
    EXPECT_TRUE(has_native(f) || !has_vendor(f)) << kernel_family_name(f) << ": only the vendor kernel is registered";
}

TEST(GpuIndex, IndexRangeMatchesTheCpuAndBadIndicesAreErrors) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (int64_t n : {1, 5000, 3000001}) {
    Tensor idx = randint(-(int64_t{1} << 40), int64_t{1} << 40, {n}, {.dtype = DType::Int64});
    int64_t lo = 0, hi = 0, want_lo = 0, want_hi = 0;
    index_range_stub(Device::cpu())(idx, &want_lo, &want_hi);
    index_range_stub(Device::cuda(0))(idx.to(Device::cuda(0)), &lo, &hi);
    EXPECT_EQ(lo, want_lo) << n;
    EXPECT_EQ(hi, want_hi) << n;
  }
  Tensor a = randn({4, 5}).to(Device::cuda(0));
  Tensor bad = from_vector<int64_t>({0, 5, 1, 2}, {4, 1}).to(Device::cuda(0));
  try {
    gather(a, 1, bad);
    FAIL() << "gather accepted index 5 for a dim of size 5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 5 is out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(one_hot(from_vector<int64_t>({1, -2}, {2}).to(Device::cuda(0)), 4), Error);
}

// ------------------------------------------------------------------ sort, topk
// sort/topk bit for bit on ties and NaN in every dtype (the op table compares with tolerances).
TEST(GpuSort, MatchesTheCpuBitForBitWithTiesNanAndEveryDtype) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(99);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::UInt8, DType::Bool}) {
    for (const Shape& s : {Shape{5, 37, 3}, Shape{2, 9000}, Shape{9000, 3}}) {
      std::vector<double> v = randint(0, 5, s, {.dtype = DType::Float64}, &gen).to_vector<double>();
      if (is_floating(dt))
        for (size_t i = 0; i < v.size(); i += 7) v[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0 : -INFINITY;
      if (dt == DType::Bool)
        for (double& e : v) e = e > 2;
      const Tensor a = from_vector<double>(v, s).to(dt);
      const Tensor d = a.to(Device::cuda(0));
      for (int64_t dim = 0; dim < a.dim(); ++dim)
        for (bool largest : {false, true})
          for (int64_t k : {a.size(dim), int64_t{1}, a.size(dim) / 2 + 1}) {
            const auto want = topk(a, k, dim, largest);
            const auto got = topk(d, k, dim, largest);
            const std::string what = std::string(dtype_name(dt)) + " " + shape_str(s) + " dim " + std::to_string(dim) +
                                     " k " + std::to_string(k) + (largest ? " largest" : "");
            const Tensor gv = got.first.cpu();
            ASSERT_EQ(gv.shape(), want.first.shape()) << what;
            const auto* gb = static_cast<const unsigned char*>(gv.raw_data());
            const auto* wb = static_cast<const unsigned char*>(want.first.raw_data());
            EXPECT_TRUE(std::equal(gb, gb + gv.numel() * gv.itemsize(), wb)) << what << ": value bits differ";
            EXPECT_EQ(got.second.cpu().to_vector<int64_t>(), want.second.to_vector<int64_t>()) << what << ": indices";
          }
    }
  }
}

// ------------------------------------------------------------------ the defects of issue 26
// Checks that only a GPU can make: sizes no CI machine can hold, streams and graphs, cuBLAS.

// Pooling over a plane of 6 x 2^29 = 3 * 2^30 elements: offsets past 2^31 inside one plane,
// where the kernels' former int32 products (ih * W + iw, OH * OW) wrapped. About 35 GB of device
// memory; single elements are read back, so the CPU never holds the plane.
TEST(GpuLargePlanes, PoolingIndexesPlanesOfMoreThanTwoToThe31Elements) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const int64_t H = 6, W = int64_t{1} << 29;
  const Device g = Device::cuda(0);
  Tensor x = zeros({1, 1, H, W}, {.device = g});
  auto at = [](const Tensor& t, int64_t r, int64_t c) { return t.select(0, 0).select(0, 0).select(0, r).select(0, c); };
  at(x, 5, W - 1).fill_(5.0);  // flat offset 6W - 1, about 3.2e9
  at(x, 4, 1000).fill_(7.0);   // 4W + 1000 = 2^31 + 1000
  x.requires_grad_(true);
  auto [y, idx] = max_pool2d_with_indices(x, {.kernel = {2, 2}});
  EXPECT_EQ(at(y, 2, W / 2 - 1).item<float>(), 5.0f);
  EXPECT_EQ(at(idx, 2, W / 2 - 1).item<int64_t>(), 6 * W - 1);
  EXPECT_EQ(at(y, 2, 500).item<float>(), 7.0f);
  EXPECT_EQ(at(idx, 2, 500).item<int64_t>(), 4 * W + 1000);
  EXPECT_EQ(at(idx, 2, 7).item<int64_t>(), 4 * W + 14);  // an all-zero window: its first element
  sum(y).backward();
  const Tensor gx = x.grad();
  EXPECT_EQ(at(gx, 5, W - 1).item<float>(), 1.0f);
  EXPECT_EQ(at(gx, 4, W - 2).item<float>(), 0.0f);  // the first element of the marker's window
  EXPECT_EQ(at(gx, 4, 14).item<float>(), 1.0f);     // the first element of a zero window
  y = Tensor(), idx = Tensor();
  NoGradGuard ng;
  for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor}) {
    set_kernel_choices(kernel_choice_name(c));
    const Tensor a = avg_pool2d(x.detach(), {.kernel = {2, 2}});
    EXPECT_EQ(at(a, 2, W / 2 - 1).item<float>(), 1.25f) << kernel_choice_name(c);
    EXPECT_EQ(at(a, 2, 500).item<float>(), 1.75f) << kernel_choice_name(c);
    EXPECT_EQ(at(a, 2, 9).item<float>(), 0.0f) << kernel_choice_name(c);
  }
  set_kernel_choices("auto");
}

// A GEMM with more than 65535 row tiles of 128 (the former grid-y limit): native and vendor
// against the CPU.
TEST(GpuLargeShapes, GemmWithMoreThan65535RowTilesRunsNativeAndVendor) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(7);
  const int64_t m = 65535 * 128 + 7;
  const Tensor a = randn({m, 4}, {}, &gen), b = randn({4, 3}, {}, &gen);
  const Tensor want = matmul(a, b);
  for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor, KernelChoice::Auto}) {
    set_kernel_choices(kernel_choice_name(c));
    const Tensor got = matmul(a.to(Device::cuda(0)), b.to(Device::cuda(0))).cpu();
    EXPECT_LE(rel_err(got, want), 1e-5) << kernel_choice_name(c);
  }
  set_kernel_choices("auto");
}

// The bfloat16 GEMM on the tensor cores (mma.sync, ldmatrix, cp.async: the PTX bodies, which the
// emulator never runs) and cuBLAS's, both transposes, edges, against the CPU's float32 product of
// the same bfloat16 values; C comes back bfloat16, rounded once.
TEST(GpuBf16Gemm, TensorCoreKernelAndCublasMatchTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(13);
  struct S {
    int64_t m, n, k;
  };
  for (const S& s : {S{256, 256, 256}, S{130, 136, 72}, S{1000, 520, 40}})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Tensor a0 = randn(ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, {}, &gen).to(DType::BFloat16);
      const Tensor b0 = randn(tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, {}, &gen).to(DType::BFloat16);
      const Tensor a = ta ? a0.t() : a0, b = tb ? b0.t() : b0;
      const Tensor want = matmul(a.to(DType::Float32), b.to(DType::Float32));
      for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor}) {
        set_kernel_choices(kernel_choice_name(c));
        const Tensor got = matmul(a.to(Device::cuda(0)), b.to(Device::cuda(0)));
        EXPECT_EQ(got.dtype(), DType::BFloat16);
        // One rounding to bfloat16 (2^-9 relative) over the float32 sums.
        EXPECT_LE(rel_err(got.cpu().to(DType::Float32), want), 1.0 / 256)
            << kernel_choice_name(c) << " " << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb " << tb;
      }
    }
  set_kernel_choices("auto");
}

// Full reductions and dots over long vectors take the two-stage kernels (many blocks, then the
// partials in order): against the CPU, and the same bits twice (deterministic).
TEST(GpuLargeShapes, FullReductionsAndDotsAreMultiBlockAndDeterministic) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(11);
  const Tensor x = randn({30'000'001}, {}, &gen), y = randn({30'000'001}, {}, &gen);
  const Tensor xd = x.to(Device::cuda(0)), yd = y.to(Device::cuda(0));
  EXPECT_LE(rel_err(sum(xd).cpu(), sum(x)), 1e-6);
  EXPECT_LE(rel_err(amax(xd).cpu(), amax(x)), 0.0);
  // The reference in float64: the CPU's float32 dot is OpenBLAS's sdot, whose error on 3e7
  // elements depends on the kernels it picked (5.5e-5 with its SSE3 "Prescott" ones on the lent
  // H200's Xeon), larger than the GPU's.
  EXPECT_LE(rel_err(dot(xd, yd).cpu(), dot(x.to(DType::Float64), y.to(DType::Float64))), 1e-6);
  EXPECT_EQ(sum(xd).item<float>(), sum(xd).item<float>());
  EXPECT_EQ(dot(xd, yd).item<float>(), dot(xd, yd).item<float>());
}

// cross_entropy no longer copies its target check back in the forward: a bad target is reported
// at the next synchronisation (here the loss's item()), with the value and the class count.
TEST(GpuCrossEntropy, OutOfRangeTargetIsReportedAtTheNextSynchronisation) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const Tensor logits = randn({4, 6}).to(Device::cuda(0));
  const Tensor target = tensor({1, 2, 9, 0}, {.dtype = DType::Int64}).to(Device::cuda(0));
  std::string msg;
  try {
    const Tensor loss = cross_entropy(logits, target);
    (void)loss.item();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("cross_entropy: target 9 is out of range for 6 classes"), std::string::npos) << msg;
  // Reported once: the next forward with good targets runs clean.
  const Tensor ok = tensor({1, 2, 3, 0}, {.dtype = DType::Int64}).to(Device::cuda(0));
  EXPECT_NO_THROW((void)cross_entropy(logits, ok).item());
}

#if EMBER_WITH_CUDA
// The compute stream is a created non-blocking stream, not the legacy default stream: Ember's
// kernels can be captured into a CUDA graph and replayed.
TEST(GpuStreams, ComputeStreamIsCreatedNonBlockingAndGraphsCaptureIt) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Stream& s = get_stream(Device::cuda(0));
  auto cs = static_cast<cudaStream_t>(s.native_handle());
  ASSERT_NE(cs, nullptr) << "the compute stream is the legacy default stream";
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(cs, &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  const Tensor a = randn({4097}).to(Device::cuda(0)), b = randn({4097}).to(Device::cuda(0));
  Tensor c = mul(add(a, b), a);  // warms the allocator's cache for the captured ops
  c = Tensor();
  s.synchronize();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed), cudaSuccess);
  c = mul(add(a, b), a);
  ASSERT_EQ(cudaStreamEndCapture(cs, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, cs), cudaSuccess);
  s.synchronize();
  const Tensor want = mul(add(a.cpu(), b.cpu()), a.cpu());
  EXPECT_LE(rel_err(c.cpu(), want), 1e-6);
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
}
#endif

#if EMBER_GPU_TESTS_HAVE_LAYERS
// Adam's multi-tensor step (a few launches for many parameters) and clip_grad_norm_'s one
// synchronisation, on the GPU against the CPU's per-tensor steps.
TEST(GpuOptim, MultiTensorAdamAndClipGradNormMatchTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(5);
  std::vector<Tensor> pc, pg;
  for (int64_t n : {1, 37, 8192, 8193, 100'000, 3'000'000}) {
    for (int i = 0; i < 5; ++i) {  // 30 parameters: more than one launch's 24 slots
      Tensor p = randn({n}, {}, &gen);
      pc.push_back(p.clone().requires_grad_(true));
      pg.push_back(p.to(Device::cuda(0)).detach().requires_grad_(true));
    }
  }
  optim::Adam oc(pc, {.lr = 1e-2, .weight_decay = 0.01}), og(pg, {.lr = 1e-2, .weight_decay = 0.01});
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = randn(pc[i].shape(), {}, &gen);
      pc[i].set_grad(g.clone());
      pg[i].set_grad(g.to(Device::cuda(0)));
    }
    const double nc = optim::clip_grad_norm_(pc, 1.0), ng = optim::clip_grad_norm_(pg, 1.0);
    EXPECT_NEAR(ng, nc, 1e-5 * nc) << "step " << step;
    oc.step();
    og.step();
  }
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_LE(rel_err(pg[i].detach().cpu(), pc[i].detach()), 1e-5) << i;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!have_gpu()) std::cout << "skipped: no CUDA device" << std::endl;
  return RUN_ALL_TESTS();
}
