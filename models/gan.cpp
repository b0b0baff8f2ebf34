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

MlpGenerator::MlpGenerator() {
  register_modules({{"l1", &l1}, {"l2", &l2}});
}
Tensor MlpGenerator::forward(const Tensor& z) {
  check_noise(z, "MlpGenerator");
  return tanh(l2(relu(l1(z)))).view({z.size(0), 1, 28, 28});
}

MlpDiscriminator::MlpDiscriminator() {
  register_modules({{"l1", &l1}, {"l2", &l2}});
}
Tensor MlpDiscriminator::forward(const Tensor& x) {
  check_image(x, "MlpDiscriminator");
  return sigmoid(l2(leaky_relu(l1(x.flatten(1)), 0.2)));
}

DcganGenerator::DcganGenerator(DcganGeneratorOptions opts)
    : options(opts),
      fc(kNoiseDim, 7 * 7 * 256, {.bias = !opts.batch_norm}),
      // A bias before batch normalisation is cancelled by its mean subtraction: leave it out.
      t1(256, 128, 5, {.stride = 1, .padding = 2, .bias = !opts.batch_norm}),
      t2(128, 64, 5, {.stride = 2, .padding = 2, .output_padding = 1, .bias = !opts.batch_norm}),
      t3(64, 1, 5, {.stride = 2, .padding = 2, .output_padding = 1}) {
  if (options.batch_norm)
    register_modules({{"fc", &fc}, {"bn0", &bn0}, {"t1", &t1}, {"bn1", &bn1}, {"t2", &t2}, {"bn2", &bn2}, {"t3", &t3}});
  else
    register_modules({{"fc", &fc}, {"t1", &t1}, {"t2", &t2}, {"t3", &t3}});
}
Tensor DcganGenerator::forward(const Tensor& z) {
  check_noise(z, "DcganGenerator");
  const bool bn = options.batch_norm;
  Tensor h = fc(z);
  if (bn) h = bn0(h);
  h = leaky_relu(h, 0.2).view({z.size(0), 256, 7, 7});
  h = t1(h);  // 7x7
  if (bn) h = bn1(h);
  h = leaky_relu(h, 0.2);
  h = t2(h);  // 14x14
  if (bn) h = bn2(h);
  h = leaky_relu(h, 0.2);
  return tanh(t3(h));  // 28x28
}

DcganDiscriminator::DcganDiscriminator() {
  register_modules({{"c1", &c1}, {"d1", &d1}, {"c2", &c2}, {"d2", &d2}, {"fc", &fc}});
}
Tensor DcganDiscriminator::forward(const Tensor& x) {
  check_image(x, "DcganDiscriminator");
  Tensor h = d1(leaky_relu(c1(x), 0.2));  // 14x14
  h = d2(leaky_relu(c2(h), 0.2));         // 7x7
  return fc(h.flatten(1));
}

}  // namespace ember::models
