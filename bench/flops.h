// The FLOP a training step of each bench/workloads.h workload executes in Ember, beside the nominal
// count of workloads.h (issue 53, item 3). Plain C++ (bench/step_rate_main.h includes it on both
// sides); `step_rate --flops` prints both counts, and bench/compare_torch.sh takes the fraction of
// SGEMM from the executed one.
//
// Executed differs from nominal in two ways:
// - Autograd skips the input gradient of a layer fed by data or noise (MnistCnn's c1, each GAN's
//   first generator layer, the discriminator's first layer on real and on detached fake images);
//   the nominal count has "forward x 3" for every layer.
// - Convolutions on Winograd's F(2x2, 3x3) and F(2x2, 5x5) paths (core/cpu/conv_kernel.cpp's
//   use_winograd, mirrored in winograd_applies below: 3x3 or 5x5, stride 1, >= 8 channels in and
//   out, output >= 6x6; here MnistCnn's c2 and the DCGAN generator's first transposed convolution)
//   run a^2 multiply-adds (a = 4 or 6) per 2x2 tile and channel pair in a^2 GEMMs, plus the
//   transforms' additions and multiplications by constants (core/cpu/conv_winograd.h), counted as
//   that code runs them, clipped tiles at odd edges included.
// Elementwise work, pooling, norms, the loss and the optimizer stay out of both counts, as in
// workloads.h; so do the layout copies around the Winograd GEMMs and the per-thread reduction of
// the weight gradient (a^2 x C x OC additions a thread, once a step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::bench::flops {

// ---------------------------------------------------------------- Winograd F(2x2, r x r), per image
struct WinogradConv {  // a 3x3 or 5x5 stride-1 convolution's geometry
  int64_t C, OC, H, W, pad, r = 3;
  constexpr int64_t OH() const { return H + 2 * pad - r + 1; }
  constexpr int64_t OW() const { return W + 2 * pad - r + 1; }
  constexpr int64_t a() const { return r + 1; }
};
// core/cpu/conv_kernel.cpp's use_winograd for float32 (a bfloat16 layer's 5x5 ones stay direct: these
// counts are the float32 step's).
constexpr bool winograd_applies(const WinogradConv& g) {
  return (g.r == 3 || g.r == 5) && g.pad < g.r && g.C >= 8 && g.OC >= 8 && g.OH() >= 6 && g.OW() >= 6 &&
         g.OW() < 16;  // OW < 16: the channels-last path
}
// The operations of conv_winograd.h's one-dimensional transforms as written (each addition,
// subtraction, negation and multiplication by a constant), by r:
// F2x3::input 4, F2x5::input 27; output's first and second value 2 and 2, or 4 and 6;
// output_grad 3 or 6; filter 6 or 25; filter_grad 8 or 26. A two-dimensional transform runs the
// one-dimensional one down each input column, then along each row of the result.
struct OneDim {
  int64_t input, out0, out1, output_grad, filter, filter_grad;
};
constexpr OneDim one_dim(int64_t r) {
  return r == 3 ? OneDim{4, 2, 2, 3, 6, 8} : OneDim{27, 4, 6, 6, 25, 26};
}
// winograd::output for one output channel over all tiles of an OH x OW output: the first pass on all
// a columns (both values), then each of the tile's up to four outputs (fewer at clipped edges).
constexpr int64_t output_transform_ops(int64_t r, int64_t OH, int64_t OW) {
  const OneDim o = one_dim(r);
  int64_t n = 0;
  for (int64_t oh = 0; oh < OH; oh += 2)
    for (int64_t ow = 0; ow < OW; ow += 2)
      n += (r + 1) * (o.out0 + o.out1) + (o.out0 + o.out1 * (ow + 1 < OW)) * (1 + (oh + 1 < OH));
  return n;
}
constexpr int64_t tiles(int64_t OH, int64_t OW) {
  return ((OH + 1) / 2) * ((OW + 1) / 2);
}
// The three passes, FLOP per image (2 per GEMM multiply-add, 1 per transform operation).
// Forward: input transform (2a one-dimensional ones a tile and input channel), a^2 GEMMs, output
// transform.
constexpr int64_t winograd_forward(const WinogradConv& g) {
  const int64_t T = tiles(g.OH(), g.OW()), a = g.a();
  return 2 * a * one_dim(g.r).input * T * g.C + 2 * a * a * T * g.C * g.OC +
         output_transform_ops(g.r, g.OH(), g.OW()) * g.OC;
}
// Input gradient: the forward of the output gradient (OC -> C channels, padding r - 1 - pad) to H x W.
constexpr int64_t winograd_input_grad(const WinogradConv& g) {
  return winograd_forward(WinogradConv{g.OC, g.C, g.OH(), g.OW(), g.r - 1 - g.pad, g.r});
}
// Weight gradient: input transform, output gradient transform (winograd::output_grad: 2 + a
// one-dimensional ones a tile and output channel), a^2 GEMMs [C, tiles] x [tiles, OC].
constexpr int64_t winograd_weight_grad(const WinogradConv& g) {
  const int64_t T = tiles(g.OH(), g.OW()), a = g.a();
  return 2 * a * one_dim(g.r).input * T * g.C + (2 + a) * one_dim(g.r).output_grad * T * g.OC +
         2 * a * a * T * g.C * g.OC;
}
// The filter transforms, once a step: winograd::filter (r + a one-dimensional ones a filter) for
// the forward and for the input gradient, winograd::filter_grad (a + r) for the weight gradient.
constexpr int64_t winograd_filter_transforms(const WinogradConv& g) {
  const OneDim o = one_dim(g.r);
  return (g.r + g.a()) * (2 * o.filter + o.filter_grad) * g.C * g.OC;
}

// Hand count for MnistCnn's c2 (32 -> 64, 13x13 -> 11x11, 6x6 tiles, the last row and column
// clipped): forward input transform 32 x 36 x 32 = 36,864; GEMMs 2 x 16 x 36 x 32 x 64 = 2,359,296;
// output transform per channel 25 full tiles x 24 + 10 edge tiles x 20 + the corner's 18 = 818,
// x 64 = 52,352. Input gradient (64 -> 32, 11x11 -> 13x13 at padding 2, 7x7 tiles): 32 x 49 x 64 =
// 100,352; 2 x 16 x 49 x 64 x 32 = 3,211,264; (36 x 24 + 12 x 20 + 18) x 32 = 35,904. Weight
// gradient: 36,864 + 18 x 36 x 64 = 41,472 + 2,359,296. Filter transforms (42 + 42 + 56) x 32 x 64.
static_assert(winograd_forward({32, 64, 13, 13, 0}) == 36864 + 2359296 + 52352);
static_assert(winograd_input_grad({32, 64, 13, 13, 0}) == 100352 + 3211264 + 35904);
static_assert(winograd_weight_grad({32, 64, 13, 13, 0}) == 36864 + 41472 + 2359296);
static_assert(winograd_filter_transforms({32, 64, 13, 13, 0}) == 140 * 32 * 64);
static_assert(winograd_applies({32, 64, 13, 13, 0}) && !winograd_applies({64, 64, 5, 5, 0}) &&
              !winograd_applies({1, 32, 28, 28, 0}));
// And for the convolution the DCGAN generator's t1 inverts (128 -> 256 at 7x7, padding 2, 4x4
// tiles, the last row and column clipped): forward input transform 12 x 27 = 324 a tile and channel,
// x 16 x 128 = 663,552; GEMMs 2 x 36 x 16 x 128 x 256 = 37,748,736; output transform per channel
// 9 full tiles x (60 + 20) + 3 x (60 + 10) at the bottom edge + 3 x (60 + 8) at the right + the
// corner's 64 = 1,198, x 256 = 306,688. Weight gradient: 663,552 + 8 x 6 x 16 x 256 = 196,608 +
// 37,748,736. Filter transforms: 11 x (25 + 25 + 26) = 836 a filter pair.
static_assert(winograd_forward({128, 256, 7, 7, 2, 5}) == 663552 + 37748736 + 306688);
static_assert(winograd_weight_grad({128, 256, 7, 7, 2, 5}) == 663552 + 196608 + 37748736);
static_assert(winograd_filter_transforms({128, 256, 7, 7, 2, 5}) == 836 * 128 * 256);
static_assert(winograd_applies({128, 256, 7, 7, 2, 5}) && !winograd_applies({128, 256, 7, 7, 2, 4}));

// ---------------------------------------------------------------- the workloads
// One layer with weights: its forward multiply-adds per sample in the direct form, and how many
// forward passes, weight gradients and input gradients a training step runs of it.
struct Layer {
  double macs;
  int forwards, weight_grads, input_grads;
  WinogradConv conv{0, 0, 0, 0, 0};  // set for a 3x3 or 5x5 stride-1 convolution (Winograd when it applies)
  bool transposed = false;           // conv is the convolution this transposed one inverts: passes swap
};

struct Count {
  double nominal_gflop = 0, executed_gflop = 0;  // per step
};

inline Count count(const std::vector<Layer>& layers, int batch) {
  Count c;
  for (const Layer& l : layers) {
    // Nominal: forward x 3 for every forward pass (bench/workloads.h's convention).
    c.nominal_gflop += 2.0 * l.macs * 3 * l.forwards * batch / 1e9;
    if (l.conv.C > 0 && winograd_applies(l.conv)) {
      // A transposed convolution's forward is the inverted one's input gradient, and the reverse.
      const double fwd = static_cast<double>(l.transposed ? winograd_input_grad(l.conv) : winograd_forward(l.conv));
      const double in = static_cast<double>(l.transposed ? winograd_forward(l.conv) : winograd_input_grad(l.conv));
      c.executed_gflop +=
          (fwd * l.forwards + static_cast<double>(winograd_weight_grad(l.conv)) * l.weight_grads + in * l.input_grads) *
              batch / 1e9 +
          static_cast<double>(winograd_filter_transforms(l.conv)) * l.forwards / 1e9;
    } else {
      c.executed_gflop += 2.0 * l.macs * (l.forwards + l.weight_grads + l.input_grads) * batch / 1e9;
    }
  }
  return c;
}

// A GAN iteration: G forward once, D forward on real, detached fake and fake. Backward: D's weights
// get gradients from all three (lg.backward() reaches them too), D's input gradients all but the
// first layer's three times and the first layer's once (for fake, toward G); G's weights once, its
// input gradients all but the first layer's (the noise) once.
inline std::vector<Layer> gan(const std::vector<double>& g_macs, const std::vector<double>& d_macs) {
  std::vector<Layer> v;
  for (size_t i = 0; i < g_macs.size(); ++i) v.push_back({g_macs[i], 1, 1, i == 0 ? 0 : 1});
  for (size_t i = 0; i < d_macs.size(); ++i) v.push_back({d_macs[i], 3, 3, i == 0 ? 1 : 3});
  return v;
}

// The layers of `workload` (bench/workloads.h's names and shapes; the per-sample multiply-adds
// of its comment). Empty for an unknown name.
inline std::vector<Layer> layers(const std::string& w) {
  if (w == "mnist_cnn")  // c1 is fed by data: no input gradient
    return {{26 * 26 * 32 * 9.0, 1, 1, 0},
            {11 * 11 * 64 * 32 * 9.0, 1, 1, 1, WinogradConv{32, 64, 13, 13, 0}},
            {3 * 3 * 64 * 64 * 9.0, 1, 1, 1, WinogradConv{64, 64, 5, 5, 0}},
            {576 * 64.0, 1, 1, 1},
            {64 * 10.0, 1, 1, 1}};
  if (w == "mlp_gan") return gan({100 * 256.0, 256 * 784.0}, {784 * 256.0, 256 * 1.0});
  if (w == "dcgan") {  // G: fc, t1 (7x7 out), t2 (14x14), t3 (28x28), 5x5 kernels; D: c1, c2, fc
    // (a transposed convolution's multiply-adds: its input pixels x C x OC x 25)
    std::vector<Layer> v = gan({100 * 12544.0, 7 * 7 * 256 * 128 * 25.0, 7 * 7 * 128 * 64 * 25.0, 14 * 14 * 64 * 25.0},
                               {14 * 14 * 64 * 25.0, 7 * 7 * 128 * 64 * 25.0, 6272.0});
    v[1].conv = WinogradConv{128, 256, 7, 7, 2, 5};  // t1 (stride 1) inverts this convolution
    v[1].transposed = true;
    return v;
  }
  // The recurrent ones per sequence: every layer's input gradient runs (the embedding is trained).
  if (w == "lstm_lm") return {{100 * 4 * 128 * (128 + 128.0), 1, 1, 1}, {100 * 128 * 10000.0, 1, 1, 1}};
  if (w == "lstm_classifier") return {{100 * 4 * 128 * (128 + 128.0), 1, 1, 1}, {128 * 10000.0, 1, 1, 1}};
  if (w == "bilstm") return {{2 * 50 * 4 * 64 * (32 + 64.0), 1, 1, 1}};
  return {};
}

}  // namespace ember::bench::flops
