// Convolutional classifiers for 28x28 single-channel images (MNIST, Fashion-MNIST).
#pragma once

#include "layers/nn.h"

namespace ember::models {

// Conv(1->32, 3x3)+ReLU, MaxPool 2, Conv(32->64, 3x3)+ReLU, MaxPool 2, Conv(64->64, 3x3)+ReLU,
// Flatten, Linear(576->64)+ReLU, Linear(64->10). Input [N, 1, 28, 28], output logits [N, 10].
// A Sequential of those twelve layers, so that a pipeline can cut it anywhere
// (dist/pipeline.h); the layers with parameters are named c1..c3, f1, f2.
class MnistCnn : public nn::Sequential {
  struct Layers;

 public:
  MnistCnn();
  // Checks the input's shape, then runs the layers.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MnistCnn"; }

  nn::Conv2d &c1, &c2, &c3;
  nn::Linear &f1, &f2;

 private:
  explicit MnistCnn(const Layers& l);
};

// LeNet-5 (LeCun et al., 1998) for 28x28 inputs: Conv(1->6, 5x5, pad 2)+Tanh, AvgPool 2,
// Conv(6->16, 5x5)+Tanh, AvgPool 2, Flatten, Linear(400->120)+Tanh, Linear(120->84)+Tanh,
// Linear(84->10). A Sequential of those layers (a pipeline can cut it, ONNX export reads it);
// the layers with parameters are named c1, c2, f1..f3.
class LeNet5 : public nn::Sequential {
  struct Layers;

 public:
  LeNet5();
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LeNet5"; }

  nn::Conv2d &c1, &c2;
  nn::Linear &f1, &f2, &f3;

 private:
  explicit LeNet5(const Layers& l);
};

}  // namespace ember::models
