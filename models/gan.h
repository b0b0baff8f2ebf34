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

// G = Linear(100->7*7*256)+LeakyReLU(0.2), reshape, ConvTranspose(256->128, 5x5, s1, p2)+LeakyReLU,
// ConvTranspose(128->64, 5x5, s2, p2, op1)+LeakyReLU, ConvTranspose(64->1, 5x5, s2, p2, op1)+Tanh.
class DcganGenerator : public nn::Module {
 public:
  DcganGenerator();
  Tensor forward(const Tensor& z) override;
  std::string type_name() const override { return "DcganGenerator"; }
  nn::Linear fc{kNoiseDim, 7 * 7 * 256};
  nn::ConvTranspose2d t1{256, 128, 5, {.stride = 1, .padding = 2}};
  nn::ConvTranspose2d t2{128, 64, 5, {.stride = 2, .padding = 2, .output_padding = 1}};
  nn::ConvTranspose2d t3{64, 1, 5, {.stride = 2, .padding = 2, .output_padding = 1}};
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
