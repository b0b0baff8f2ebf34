// The FLOP a training step of each bench/workloads.h workload executes in Ember, beside the nominal
// count of workloads.h (issue 53, item 3). Plain C++ (bench/step_rate_main.h includes it on both
// sides); `step_rate --flops` prints both counts, and bench/compare_torch.sh takes the fraction of
// SGEMM from the executed one.
//
// Executed differs from nominal in two ways:
// - Autograd skips the input gradient of a layer fed by data or noise (MnistCnn's c1, each GAN's
//   first generator layer, the discriminator's first layer on real and on detached fake images);
//   the nominal count has "forward x 3" for every layer.
// - Convolutions on Winograd's F(2x2, 3x3) path (core/cpu/conv_kernel.cpp's use_winograd, mirrored
//   in winograd_applies below: 3x3, stride 1, >= 8 channels in and out, output >= 6x6, MnistCnn's c2
//   and nothing else here) run 16 multiply-adds per 2x2 tile and channel pair in 16 GEMMs, plus the
//   transforms' additions and halvings (core/cpu/conv_winograd.h), counted as that code runs them,
//   clipped tiles at odd edges included.
// Elementwise work, pooling, norms, the loss and the optimizer stay out of both counts, as in
// workloads.h; so do the layout copies around the Winograd GEMMs and the per-thread reduction of
// the weight gradient (16 x C x OC additions a thread, once a step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::bench::flops {

// ---------------------------------------------------------------- Winograd F(2x2, 3x3), per image
struct Conv3x3 {  // a 3x3 stride-1 convolution's geometry
  int64_t C, OC, H, W, pad;
  constexpr int64_t OH() const { return H + 2 * pad - 2; }
  constexpr int64_t OW() const { return W + 2 * pad - 2; }
};
constexpr bool winograd_applies(const Conv3x3& g) {  // core/cpu/conv_kernel.cpp: use_winograd
  return g.pad <= 2 && g.C >= 8 && g.OC >= 8 && g.OH() >= 6 && g.OW() >= 6 && g.OW() < 16;  // OW < 16: channels-last
}
// winograd::output's additions for one output channel over all tiles of an OH x OW output: 16 for
// A^T m, then 2 for each of the tile's up to four outputs (fewer at clipped edges).
constexpr int64_t output_transform_adds(int64_t OH, int64_t OW) {
  int64_t n = 0;
  for (int64_t oh = 0; oh < OH; oh += 2)
    for (int64_t ow = 0; ow < OW; ow += 2) n += 16 + 2 * (1 + (ow + 1 < OW)) * (1 + (oh + 1 < OH));
  return n;
}
constexpr int64_t tiles(int64_t OH, int64_t OW) { return ((OH + 1) / 2) * ((OW + 1) / 2); }
// The three passes, FLOP per image (2 per GEMM multiply-add, 1 per transform addition or halving).
// Forward: input transform (32 a tile and input channel), 16 GEMMs, output transform.
constexpr int64_t winograd_forward(const Conv3x3& g) {
  const int64_t T = tiles(g.OH(), g.OW());
  return 32 * T * g.C + 2 * 16 * T * g.C * g.OC + output_transform_adds(g.OH(), g.OW()) * g.OC;
}
// Input gradient: the forward of the output gradient (OC -> C channels, padding 2 - pad) to H x W.
constexpr int64_t winograd_input_grad(const Conv3x3& g) {
  return winograd_forward(Conv3x3{g.OC, g.C, g.OH(), g.OW(), 2 - g.pad});
}
// Weight gradient: input transform, output gradient transform (winograd::output_grad: 18 a tile
// and output channel), 16 GEMMs [C, tiles] x [tiles, OC].
constexpr int64_t winograd_weight_grad(const Conv3x3& g) {
  const int64_t T = tiles(g.OH(), g.OW());
  return 32 * T * g.C + 18 * T * g.OC + 2 * 16 * T * g.C * g.OC;
}
// The filter transforms, once a step: winograd::filter (42 a filter) for the forward and for the
// input gradient, winograd::filter_grad (56) for the weight gradient.
constexpr int64_t winograd_filter_transforms(const Conv3x3& g) { return (42 + 42 + 56) * g.C * g.OC; }

// Hand count for MnistCnn's c2 (32 -> 64, 13x13 -> 11x11, 6x6 tiles, the last row and column
// clipped): forward input transform 32 x 36 x 32 = 36,864; GEMMs 2 x 16 x 36 x 32 x 64 = 2,359,296;
// output transform per channel 25 full tiles x 24 + 10 edge tiles x 20 + the corner's 18 = 818,
// x 64 = 52,352. Input gradient (64 -> 32, 11x11 -> 13x13 at padding 2, 7x7 tiles): 32 x 49 x 64 =
// 100,352; 2 x 16 x 49 x 64 x 32 = 3,211,264; (36 x 24 + 12 x 20 + 18) x 32 = 35,904. Weight
// gradient: 36,864 + 18 x 36 x 64 = 41,472 + 2,359,296.
static_assert(winograd_forward({32, 64, 13, 13, 0}) == 36864 + 2359296 + 52352);
static_assert(winograd_input_grad({32, 64, 13, 13, 0}) == 100352 + 3211264 + 35904);
static_assert(winograd_weight_grad({32, 64, 13, 13, 0}) == 36864 + 41472 + 2359296);
static_assert(winograd_applies({32, 64, 13, 13, 0}) && !winograd_applies({64, 64, 5, 5, 0}) &&
              !winograd_applies({1, 32, 28, 28, 0}));

// ---------------------------------------------------------------- the workloads
// One layer with weights: its forward multiply-adds per sample in the direct form, and how many
// forward passes, weight gradients and input gradients a training step runs of it.
struct Layer {
  double macs;
  int forwards, weight_grads, input_grads;
  Conv3x3 conv{0, 0, 0, 0, 0};  // set for a 3x3 stride-1 convolution (Winograd when it applies)
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
      c.executed_gflop += (static_cast<double>(winograd_forward(l.conv)) * l.forwards +
                           static_cast<double>(winograd_weight_grad(l.conv)) * l.weight_grads +
                           static_cast<double>(winograd_input_grad(l.conv)) * l.input_grads) *
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
            {11 * 11 * 64 * 32 * 9.0, 1, 1, 1, Conv3x3{32, 64, 13, 13, 0}},
            {3 * 3 * 64 * 64 * 9.0, 1, 1, 1, Conv3x3{64, 64, 5, 5, 0}},
            {576 * 64.0, 1, 1, 1},
            {64 * 10.0, 1, 1, 1}};
  if (w == "mlp_gan") return gan({100 * 256.0, 256 * 784.0}, {784 * 256.0, 256 * 1.0});
  if (w == "dcgan")  // G: fc, t1 (7x7 out), t2 (14x14), t3 (28x28), 5x5 kernels; D: c1, c2, fc
    // (a transposed convolution's multiply-adds: its input pixels x C x OC x 25)
    return gan({100 * 12544.0, 7 * 7 * 256 * 128 * 25.0, 7 * 7 * 128 * 64 * 25.0, 14 * 14 * 64 * 25.0},
               {14 * 14 * 64 * 25.0, 7 * 7 * 128 * 64 * 25.0, 6272.0});
  // The recurrent ones per sequence: every layer's input gradient runs (the embedding is trained).
  if (w == "lstm_lm") return {{100 * 4 * 128 * (128 + 128.0), 1, 1, 1}, {100 * 128 * 10000.0, 1, 1, 1}};
  if (w == "lstm_classifier") return {{100 * 4 * 128 * (128 + 128.0), 1, 1, 1}, {128 * 10000.0, 1, 1, 1}};
  if (w == "bilstm") return {{2 * 50 * 4 * 64 * (32 + 64.0), 1, 1, 1}};
  return {};
}

}  // namespace ember::bench::flops
