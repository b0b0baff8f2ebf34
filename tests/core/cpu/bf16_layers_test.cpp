// Convolution and LSTM kernels on bfloat16 tensors (core/cpu/lowp_reference.h): float32 code around
// bfloat16 GEMMs, each level's kernels run where this CPU has the level. Compared with the
// float32 kernels on the same (bfloat16-representable) values: the GEMM operands that are not
// already bfloat16 (im2col is exact, Winograd transforms and gate gradients are not) are rounded
// once, so results agree to about bfloat16 precision; and the products must go through the
// bfloat16 GEMM (gemm_stub), which is what makes the layer fast.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "core/gemm_kernels.h"
#include "core/nn_kernels.h"
#include "core/ops.h"
#include "core/rnn_kernels.h"
#include "core/tensor.h"
#include "cpu_level_test.h"

using namespace ember;

namespace {

EMBER_CPU_LEVEL_FIXTURE(Bf16Layers);

// Atomic: the convolution's GEMMs run on OpenMP threads, each through the observer.
std::atomic<int> g_bf16_gemms = 0;
void count_gemms(const void* stub, DeviceType t, int) {
  if (t == DeviceType::CPU && stub == &gemm_stub) ++g_bf16_gemms;
}

// A float32 tensor of normal values rounded to bfloat16, and its bfloat16 twin.
struct Pair {
  Tensor f32, b16;
};
Pair random_pair(Shape s, uint64_t seed) {
  Generator g(seed);
  Tensor b16 = randn(s, {}, &g).to(DType::BFloat16);
  return {b16.to(DType::Float32), b16};
}

// max |got - ref| over max |ref|.
double relative_error(const Tensor& got, const Tensor& ref) {
  const Tensor a = got.to(DType::Float64).contiguous(), b = ref.to(DType::Float64).contiguous();
  const double* x = a.data_ptr<double>();
  const double* y = b.data_ptr<double>();
  double err = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    err = std::max(err, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return err / std::max(scale, 1e-30);
}

// Runs at this file's level, counting the bfloat16 GEMMs; restores the level after.
class AtThisLevel {
 public:
  AtThisLevel() : saved_(cpu_capability()) {
    set_cpu_capability(static_cast<CpuCapability>(EMBER_CPU_LEVEL));
    g_bf16_gemms = 0;
    set_dispatch_observer(&count_gemms);
  }
  ~AtThisLevel() {
    set_dispatch_observer(nullptr);
    set_cpu_capability(saved_);
  }

 private:
  CpuCapability saved_;
};

// Three convolutions: plain im2col (5x5, stride 2), Winograd (3x3, 64 -> 64 at 13x13), 1x1, each
// with a forward GEMM at least kBf16MinK deep.
std::vector<ConvGeometry> geometries() {
  std::vector<ConvGeometry> v;
  ConvGeometry a;
  a.N = 3, a.C = 16, a.H = 14, a.W = 14, a.OC = 24, a.KH = 5, a.KW = 5, a.sh = a.sw = 2, a.ph = a.pw = 2;
  a.OH = 7, a.OW = 7;
  v.push_back(a);
  ConvGeometry b;
  b.N = 2, b.C = 64, b.H = 13, b.W = 13, b.OC = 64, b.KH = 3, b.KW = 3, b.OH = 11, b.OW = 11;
  v.push_back(b);
  ConvGeometry c;
  c.N = 2, c.C = 96, c.H = 8, c.W = 8, c.OC = 80, c.KH = 1, c.KW = 1, c.OH = 8, c.OW = 8;
  v.push_back(c);
  // 5x5 stride 1 at 7x7, 128 -> 96: the geometry float32 runs on Winograd F(2x2, 5x5) (the DCGAN's
  // first transposed convolution), whose transforms grow bfloat16's rounding error about 9x.
  ConvGeometry d;
  d.N = 2, d.C = 128, d.H = 7, d.W = 7, d.OC = 96, d.KH = 5, d.KW = 5, d.ph = d.pw = 2, d.OH = 7, d.OW = 7;
  v.push_back(d);
  return v;
}

EMBER_CPU_LEVEL_TEST(Bf16Layers, ConvolutionPassesAgreeWithFloat32ThroughTheBf16Gemm) {
  for (const ConvGeometry& g : geometries()) {
    const Pair x = random_pair({g.N, g.C, g.H, g.W}, 1), w = random_pair({g.OC, g.C, g.KH, g.KW}, 2);
    const Pair b = random_pair({g.OC}, 3), go = random_pair({g.N, g.OC, g.OH, g.OW}, 4);
    Tensor out32 = empty({g.N, g.OC, g.OH, g.OW}), gi32 = empty(x.f32.shape()), gw32 = empty(w.f32.shape());
    Tensor gb32 = empty({g.OC});
    conv2d_forward_stub.cpu_kernel()(out32, x.f32, w.f32, b.f32, g);
    conv2d_backward_input_stub.cpu_kernel()(gi32, go.f32, w.f32, Tensor(), g);
    conv2d_backward_weight_stub.cpu_kernel()(gw32, gb32, go.f32, x.f32, g);
    const TensorOptions bf{DType::BFloat16};
    Tensor out = empty(out32.shape(), bf), gi = empty(gi32.shape(), bf), gw = empty(gw32.shape(), bf);
    Tensor gb = empty({g.OC}, bf);
    AtThisLevel level;
    conv2d_forward_stub.cpu_kernel()(out, x.b16, w.b16, b.b16, g);
    const int forward_gemms = g_bf16_gemms.load();
    conv2d_backward_input_stub.cpu_kernel()(gi, go.b16, w.b16, Tensor(), g);
    conv2d_backward_weight_stub.cpu_kernel()(gw, gb, go.b16, x.b16, g);
    const std::string at = "C " + std::to_string(g.C) + " OC " + std::to_string(g.OC) + " k " + std::to_string(g.KH);
    EXPECT_GT(forward_gemms, 0) << at;
    EXPECT_GT(g_bf16_gemms.load(), forward_gemms) << at;
    EXPECT_LT(relative_error(out, out32), 0.02) << at;
    EXPECT_LT(relative_error(gi, gi32), 0.02) << at;
    EXPECT_LT(relative_error(gw, gw32), 0.02) << at;
    EXPECT_LT(relative_error(gb, gb32), 0.01) << at;
  }
}

// An LSTM layer's forward and backward (T 14, B 5, I 64, H 48: every gate GEMM at least kBf16MinK deep).
EMBER_CPU_LEVEL_TEST(Bf16Layers, LstmAgreesWithFloat32ThroughTheBf16Gemm) {
  const int64_t T = 14, B = 5, I = 64, H = 48, GH = 4 * H;
  const Pair x = random_pair({T, B, I}, 5), wi = random_pair({GH, I}, 6), wh = random_pair({GH, H}, 7);
  const Pair bi = random_pair({GH}, 8), go = random_pair({T, B, H}, 9), gh = random_pair({B, H}, 10);
  const Pair gc = random_pair({B, H}, 11);
  auto run = [&](bool bf16) {
    const TensorOptions o{bf16 ? DType::BFloat16 : DType::Float32};
    RnnForwardArgs f;
    f.cfg = RnnConfig{RnnMode::Lstm, false, T, B, I, H, {}};
    f.input = bf16 ? x.b16 : x.f32, f.w_ih = bf16 ? wi.b16 : wi.f32, f.w_hh = bf16 ? wh.b16 : wh.f32;
    f.b_ih = bf16 ? bi.b16 : bi.f32;
    f.output = empty({T, B, H}, o), f.h_n = empty({B, H}, o), f.c_n = empty({B, H}, o);
    f.ws = {empty({T, B, GH}, o), empty({T + 1, B, H}, o), empty({T + 1, B, H}, o), Tensor()};
    rnn_forward_stub.cpu_kernel()(std::span{&f, 1});
    RnnBackwardArgs r;
    r.cfg = f.cfg, r.input = f.input, r.w_ih = f.w_ih, r.w_hh = f.w_hh, r.b_ih = f.b_ih, r.ws = f.ws;
    r.grad_output = bf16 ? go.b16 : go.f32, r.grad_h_n = bf16 ? gh.b16 : gh.f32, r.grad_c_n = bf16 ? gc.b16 : gc.f32;
    r.grad_input = empty({T, B, I}, o), r.grad_w_ih = empty({GH, I}, o), r.grad_w_hh = empty({GH, H}, o);
    r.grad_b_ih = empty({GH}, o);
    rnn_backward_stub.cpu_kernel()(std::span{&r, 1});
    return std::vector<Tensor>{f.output, f.c_n, r.grad_input, r.grad_w_ih, r.grad_w_hh, r.grad_b_ih};
  };
  const std::vector<Tensor> ref = run(false);
  AtThisLevel level;
  const std::vector<Tensor> got = run(true);
  EXPECT_GE(g_bf16_gemms.load(), 4);  // the input projection, and the input and both weight gradients
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_LT(relative_error(got[i], ref[i]), 0.03) << "output " << i;
}

}  // namespace
