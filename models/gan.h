// Generative adversarial networks for 28x28 images in [-1, 1]: a multilayer-perceptron GAN and a
// DCGAN. Generators map noise [N, 100] to images [N, 1, 28, 28]; discriminators map images to
// one score per image (a probability for the MLP GAN, a logit for the DCGAN).
#pragma once

#include "layers/nn.h"

namespace ember::models {

inline constexpr int64_t kNoiseDim = 100;

// Each network is a Sequential of its layers (a pipeline can cut it, ONNX export reads it) that
// checks its input's shape first; the layers with parameters are members under their old names,
// so checkpoints and state dicts name the same tensors as before.

// G = Linear(100->256)+ReLU, Linear(256->784)+Tanh, Unflatten to [1, 28, 28].
class MlpGenerator : public nn::Sequential {
  struct Layers;

 public:
  MlpGenerator();
  Tensor forward(const Tensor& z) override;
  std::string type_name() const override { return "MlpGenerator"; }
  nn::Linear &l1, &l2;

 private:
  explicit MlpGenerator(const Layers& l);
};

// D = Flatten, Linear(784->256)+LeakyReLU(0.2), Linear(256->1)+Sigmoid. Output [N, 1].
class MlpDiscriminator : public nn::Sequential {
  struct Layers;

 public:
  MlpDiscriminator();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MlpDiscriminator"; }
  nn::Linear &l1, &l2;

 private:
  explicit MlpDiscriminator(const Layers& l);
};

struct DcganGeneratorOptions {
  // Batch normalisation after fc and after t1 and t2 (those three layers then have no bias), as
  // in TensorFlow's DCGAN tutorial that this architecture comes from. On by default because the
  // issue's recipe without it (bias everywhere, no normalisation) collapses within a few hundred
  // steps on Fashion-MNIST to near-black dot patterns: measured in Ember and in libtorch alike
  // (README, Results). Off gives exactly the architecture.
  bool batch_norm = true;
};

// G = Linear(100->7*7*256)[+BN]+LeakyReLU(0.2), Unflatten to [256, 7, 7], ConvTranspose(256->128,
// 5x5, s1, p2)[+BN]+LeakyReLU, ConvTranspose(128->64, 5x5, s2, p2, op1)[+BN]+LeakyReLU,
// ConvTranspose(64->1, 5x5, s2, p2, op1)+Tanh. With batch_norm, bn0 is a BatchNorm1d over the 12544
// fc features (per feature, as Keras' BatchNormalization after Dense), bn1/bn2 BatchNorm2d; their
// running statistics are module state (checkpointed) and are what eval() samples with.
class DcganGenerator : public nn::Sequential {
  struct Layers;

 public:
  explicit DcganGenerator(DcganGeneratorOptions options = {});
  Tensor forward(const Tensor& z) override;
  std::string type_name() const override { return "DcganGenerator"; }
  std::string extra_repr() const override { return options.batch_norm ? "batch_norm" : "no batch_norm"; }
  DcganGeneratorOptions options;
  nn::Linear& fc;
  nn::ConvTranspose2d &t1, &t2, &t3;
  // In the Sequential (and so in parameters() and the state dict) only with options.batch_norm.
  nn::BatchNorm1d& bn0;
  nn::BatchNorm2d &bn1, &bn2;

 private:
  DcganGenerator(DcganGeneratorOptions options, const Layers& l);
  std::vector<std::shared_ptr<nn::Module>> unused_;  // bn0..bn2 without batch_norm: the members refer to them
};

// D = Conv(1->64, 5x5, s2, p2)+LeakyReLU+Dropout 0.3, Conv(64->128, 5x5, s2, p2)+LeakyReLU+Dropout
// 0.3, Flatten, Linear(7*7*128->1). Output logits [N, 1].
class DcganDiscriminator : public nn::Sequential {
  struct Layers;

 public:
  DcganDiscriminator();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "DcganDiscriminator"; }
  nn::Conv2d &c1, &c2;
  nn::Dropout &d1, &d2;
  nn::Linear& fc;

 private:
  explicit DcganDiscriminator(const Layers& l);
};

}  // namespace ember::models
