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

LeNet5::LeNet5() {
  register_modules({{"c1", &c1}, {"c2", &c2}, {"f1", &f1}, {"f2", &f2}, {"f3", &f3}});
}

Tensor LeNet5::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "LeNet5: expected input [N, 1, 28, 28], got ", shape_str(x.shape()));
  Tensor h = avg_pool2d(tanh(c1(x)), {.kernel = {2, 2}});      // 28 -> 14
  h = avg_pool2d(tanh(c2(h)), {.kernel = {2, 2}}).flatten(1);  // 10 -> 5: 16*5*5 = 400
  h = tanh(f2(tanh(f1(h))));
  return f3(h);
}

}  // namespace ember::models
