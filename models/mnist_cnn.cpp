#include "models/mnist_cnn.h"

namespace ember::models {

// The layers with parameters, made in this order so that a seed gives the weights it always gave.
struct MnistCnn::Layers {
  std::shared_ptr<nn::Conv2d> c1 = nn::make<nn::Conv2d>(1, 32, 3), c2 = nn::make<nn::Conv2d>(32, 64, 3),
                              c3 = nn::make<nn::Conv2d>(64, 64, 3);
  std::shared_ptr<nn::Linear> f1 = nn::make<nn::Linear>(576, 64), f2 = nn::make<nn::Linear>(64, 10);
};

MnistCnn::MnistCnn() : MnistCnn(Layers{}) {}

MnistCnn::MnistCnn(const Layers& l)
    : nn::Sequential({{"c1", l.c1},
                      {"relu1", nn::make<nn::ReLU>()},
                      {"pool1", nn::make<nn::MaxPool2d>(2)},  // 26 -> 13
                      {"c2", l.c2},
                      {"relu2", nn::make<nn::ReLU>()},
                      {"pool2", nn::make<nn::MaxPool2d>(2)},  // 11 -> 5
                      {"c3", l.c3},
                      {"relu3", nn::make<nn::ReLU>()},
                      {"flatten", nn::make<nn::Flatten>()},  // 3x3x64 = 576
                      {"f1", l.f1},
                      {"relu4", nn::make<nn::ReLU>()},
                      {"f2", l.f2}}),
      c1(*l.c1),
      c2(*l.c2),
      c3(*l.c3),
      f1(*l.f1),
      f2(*l.f2) {}

Tensor MnistCnn::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "MnistCnn: expected input [N, 1, 28, 28], got ", shape_str(x.shape()));
  return nn::Sequential::forward(x);
}

struct LeNet5::Layers {
  std::shared_ptr<nn::Conv2d> c1 = nn::make<nn::Conv2d>(1, 6, 5, nn::Conv2dOptions{.padding = 2}),
                              c2 = nn::make<nn::Conv2d>(6, 16, 5);
  std::shared_ptr<nn::Linear> f1 = nn::make<nn::Linear>(400, 120), f2 = nn::make<nn::Linear>(120, 84),
                              f3 = nn::make<nn::Linear>(84, 10);
};

LeNet5::LeNet5() : LeNet5(Layers{}) {}

LeNet5::LeNet5(const Layers& l)
    : nn::Sequential({{"c1", l.c1},
                      {"tanh1", nn::make<nn::Tanh>()},
                      {"pool1", nn::make<nn::AvgPool2d>(2)},  // 28 -> 14
                      {"c2", l.c2},
                      {"tanh2", nn::make<nn::Tanh>()},
                      {"pool2", nn::make<nn::AvgPool2d>(2)},  // 10 -> 5
                      {"flatten", nn::make<nn::Flatten>()},   // 16x5x5 = 400
                      {"f1", l.f1},
                      {"tanh3", nn::make<nn::Tanh>()},
                      {"f2", l.f2},
                      {"tanh4", nn::make<nn::Tanh>()},
                      {"f3", l.f3}}),
      c1(*l.c1),
      c2(*l.c2),
      f1(*l.f1),
      f2(*l.f2),
      f3(*l.f3) {}

Tensor LeNet5::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "LeNet5: expected input [N, 1, 28, 28], got ", shape_str(x.shape()));
  return nn::Sequential::forward(x);
}

}  // namespace ember::models
