// Generative adversarial networks for 28x28 images in [-1, 1]: a multilayer-perceptron GAN and a
// DCGAN. Generators map noise [N, 100] to images [N, 1, 28, 28]; discriminators map images to
// one score per image (a probability for the MLP GAN, a logit for the DCGAN).
#pragma once

#include "layers/nn.h"

namespace ember::models {

inline constexpr int64_t kNoiseDim = 100;

// G = Linear(100->256)+ReLU, Linear(256->784)+Tanh.
class MlpGenerator : public nn::Module {
 public:
  MlpGenerator();
  Tensor forward(const Tensor& z) override;
  std::string type_name() const override { return "MlpGenerator"; }
  nn::Linear l1{kNoiseDim, 256}, l2{256, 784};
};

// D = Linear(784->256)+LeakyReLU(0.2), Linear(256->1)+Sigmoid. Output [N, 1].
class MlpDiscriminator : public nn::Module {
 public:
  MlpDiscriminator();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MlpDiscriminator"; }
  nn::Linear l1{784, 256}, l2{256, 1};
};

struct DcganGeneratorOptions {
  // Batch normalisation after fc and after t1 and t2 (those three layers then have no bias), as
  // in TensorFlow's DCGAN tutorial that this architecture comes from. On by default because the
  // issue's recipe without it (bias everywhere, no normalisation) collapses within a few hundred
  // steps on Fashion-MNIST to near-black dot patterns: measured in Ember and in libtorch alike
  // (README, Results). Off gives exactly the architecture.
  bool batch_norm = true;
};

// G = Linear(100->7*7*256)[+BN]+LeakyReLU(0.2), reshape, ConvTranspose(256->128, 5x5, s1, p2)[+BN]
// +LeakyReLU, ConvTranspose(128->64, 5x5, s2, p2, op1)[+BN]+LeakyReLU, ConvTranspose(64->1, 5x5,
// s2, p2, op1)+Tanh. With batch_norm, bn0 is a BatchNorm1d over the 12544 fc features (per
// feature, as Keras' BatchNormalization after Dense), bn1/bn2 BatchNorm2d; their running
// statistics are module state (checkpointed) and are what eval() samples with.
class DcganGenerator : public nn::Module {
 public:
  explicit DcganGenerator(DcganGeneratorOptions options = {});
  Tensor forward(const Tensor& z) override;
  std::string type_name() const override { return "DcganGenerator"; }
  std::string extra_repr() const override { return options.batch_norm ? "batch_norm" : "no batch_norm"; }
  DcganGeneratorOptions options;
  nn::Linear fc;
  nn::ConvTranspose2d t1, t2, t3;
  // Registered (and so in parameters() and the state dict) only with options.batch_norm.
  nn::BatchNorm1d bn0{7 * 7 * 256};
  nn::BatchNorm2d bn1{128}, bn2{64};
};

// D = Conv(1->64, 5x5, s2, p2)+LeakyReLU+Dropout 0.3, Conv(64->128, 5x5, s2, p2)+LeakyReLU+Dropout
// 0.3, Flatten, Linear(7*7*128->1). Output logits [N, 1].
class DcganDiscriminator : public nn::Module {
 public:
  DcganDiscriminator();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "DcganDiscriminator"; }
  nn::Conv2d c1{1, 64, 5, {.stride = 2, .padding = 2}}, c2{64, 128, 5, {.stride = 2, .padding = 2}};
  nn::Dropout d1{0.3}, d2{0.3};
  nn::Linear fc{7 * 7 * 128, 1};
};

}  // namespace ember::models
