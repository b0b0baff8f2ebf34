#include "models/mnist_cnn.h"

namespace ember::models {

MnistCnn::MnistCnn() { register_modules({{"c1", &c1}, {"c2", &c2}, {"c3", &c3}, {"f1", &f1}, {"f2", &f2}}); }

Tensor MnistCnn::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "MnistCnn: expected input [N, 1, 28, 28], got ", shape_str(x.shape()));
  Tensor h = max_pool2d(relu(c1(x)), 2);  // 26 -> 13
  h = max_pool2d(relu(c2(h)), 2);         // 11 -> 5
  h = relu(c3(h)).flatten(1);             // 3x3x64 = 576
  return f2(relu(f1(h)));
}

LeNet5::LeNet5() { register_modules({{"c1", &c1}, {"c2", &c2}, {"f1", &f1}, {"f2", &f2}, {"f3", &f3}}); }

Tensor LeNet5::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28,
              "LeNet5: expected input [N, 1, 28, 28], got ", shape_str(x.shape()));
  Tensor h = avg_pool2d(tanh(c1(x)), {.kernel = {2, 2}});  // 28 -> 14
  h = avg_pool2d(tanh(c2(h)), {.kernel = {2, 2}}).flatten(1);  // 10 -> 5: 16*5*5 = 400
  h = tanh(f2(tanh(f1(h))));
  return f3(h);
}

}  // namespace ember::models
