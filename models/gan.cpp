#include "models/gan.h"

namespace ember::models {

namespace {
void check_noise(const Tensor& z, const char* who) {
  EMBER_CHECK(z.dim() == 2 && z.size(1) == kNoiseDim, who, ": expected noise [N, ", kNoiseDim, "], got ",
              shape_str(z.shape()));
}
void check_image(const Tensor& x, const char* who) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == 28 && x.size(3) == 28, who,
              ": expected images [N, 1, 28, 28], got ", shape_str(x.shape()));
}
}  // namespace

MlpGenerator::MlpGenerator() { register_modules({{"l1", &l1}, {"l2", &l2}}); }
Tensor MlpGenerator::forward(const Tensor& z) {
  check_noise(z, "MlpGenerator");
  return tanh(l2(relu(l1(z)))).view({z.size(0), 1, 28, 28});
}

MlpDiscriminator::MlpDiscriminator() { register_modules({{"l1", &l1}, {"l2", &l2}}); }
Tensor MlpDiscriminator::forward(const Tensor& x) {
  check_image(x, "MlpDiscriminator");
  return sigmoid(l2(leaky_relu(l1(x.flatten(1)), 0.2)));
}

DcganGenerator::DcganGenerator() { register_modules({{"fc", &fc}, {"t1", &t1}, {"t2", &t2}, {"t3", &t3}}); }
Tensor DcganGenerator::forward(const Tensor& z) {
  check_noise(z, "DcganGenerator");
  Tensor h = leaky_relu(fc(z), 0.2).view({z.size(0), 256, 7, 7});
  h = leaky_relu(t1(h), 0.2);  // 7x7
  h = leaky_relu(t2(h), 0.2);  // 14x14
  return tanh(t3(h));          // 28x28
}

DcganDiscriminator::DcganDiscriminator() {
  register_modules({{"c1", &c1}, {"d1", &d1}, {"c2", &c2}, {"d2", &d2}, {"fc", &fc}});
}
Tensor DcganDiscriminator::forward(const Tensor& x) {
  check_image(x, "DcganDiscriminator");
  Tensor h = d1(leaky_relu(c1(x), 0.2));  // 14x14
  h = d2(leaky_relu(c2(h), 0.2));          // 7x7
  return fc(h.flatten(1));
}

}  // namespace ember::models
