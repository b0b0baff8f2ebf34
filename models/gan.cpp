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

// The layers with parameters are made in the order the members were, so that a seed gives the
// weights it always gave.
struct MlpGenerator::Layers {
  std::shared_ptr<nn::Linear> l1 = nn::make<nn::Linear>(kNoiseDim, 256), l2 = nn::make<nn::Linear>(256, 784);
};
MlpGenerator::MlpGenerator() : MlpGenerator(Layers{}) {}
MlpGenerator::MlpGenerator(const Layers& l)
    : nn::Sequential({{"l1", l.l1},
                      {"relu", nn::make<nn::ReLU>()},
                      {"l2", l.l2},
                      {"tanh", nn::make<nn::Tanh>()},
                      {"image", nn::make<nn::Unflatten>(1, Shape{1, 28, 28})}}),
      l1(*l.l1),
      l2(*l.l2) {}
Tensor MlpGenerator::forward(const Tensor& z) {
  check_noise(z, "MlpGenerator");
  return nn::Sequential::forward(z);
}

struct MlpDiscriminator::Layers {
  std::shared_ptr<nn::Linear> l1 = nn::make<nn::Linear>(784, 256), l2 = nn::make<nn::Linear>(256, 1);
};
MlpDiscriminator::MlpDiscriminator() : MlpDiscriminator(Layers{}) {}
MlpDiscriminator::MlpDiscriminator(const Layers& l)
    : nn::Sequential({{"flatten", nn::make<nn::Flatten>()},
                      {"l1", l.l1},
                      {"lrelu", nn::make<nn::LeakyReLU>(0.2)},
                      {"l2", l.l2},
                      {"sigmoid", nn::make<nn::Sigmoid>()}}),
      l1(*l.l1),
      l2(*l.l2) {}
Tensor MlpDiscriminator::forward(const Tensor& x) {
  check_image(x, "MlpDiscriminator");
  return nn::Sequential::forward(x);
}

struct DcganGenerator::Layers {
  explicit Layers(const DcganGeneratorOptions& o)
      : fc(nn::make<nn::Linear>(kNoiseDim, 7 * 7 * 256, nn::LinearOptions{.bias = !o.batch_norm})),
        // A bias before batch normalisation is cancelled by its mean subtraction: leave it out.
        t1(nn::make<nn::ConvTranspose2d>(256, 128, 5,
                                         nn::ConvTranspose2dOptions{.stride = 1, .padding = 2, .bias = !o.batch_norm})),
        t2(nn::make<nn::ConvTranspose2d>(
            128, 64, 5,
            nn::ConvTranspose2dOptions{.stride = 2, .padding = 2, .output_padding = 1, .bias = !o.batch_norm})),
        t3(nn::make<nn::ConvTranspose2d>(64, 1, 5,
                                         nn::ConvTranspose2dOptions{.stride = 2, .padding = 2, .output_padding = 1})) {}
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::ConvTranspose2d> t1, t2, t3;
  std::shared_ptr<nn::BatchNorm1d> bn0 = nn::make<nn::BatchNorm1d>(7 * 7 * 256);
  std::shared_ptr<nn::BatchNorm2d> bn1 = nn::make<nn::BatchNorm2d>(128), bn2 = nn::make<nn::BatchNorm2d>(64);

  // fc [bn0] lrelu, unflatten, t1 [bn1] lrelu, t2 [bn2] lrelu, t3 tanh.
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> chain(bool batch_norm) const {
    std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> c;
    auto block = [&](const std::string& n, std::shared_ptr<nn::Module> layer, const std::string& bn_name,
                     std::shared_ptr<nn::Module> bn) {
      c.emplace_back(n, std::move(layer));
      if (batch_norm) c.emplace_back(bn_name, std::move(bn));
      c.emplace_back("lrelu_" + n, nn::make<nn::LeakyReLU>(0.2));
    };
    block("fc", fc, "bn0", bn0);
    c.emplace_back("unflatten", nn::make<nn::Unflatten>(1, Shape{256, 7, 7}));
    block("t1", t1, "bn1", bn1);  // 7x7
    block("t2", t2, "bn2", bn2);  // 14x14
    c.emplace_back("t3", t3);     // 28x28
    c.emplace_back("tanh", nn::make<nn::Tanh>());
    return c;
  }
};
DcganGenerator::DcganGenerator(DcganGeneratorOptions opts) : DcganGenerator(opts, Layers(opts)) {}
DcganGenerator::DcganGenerator(DcganGeneratorOptions opts, const Layers& l)
    : nn::Sequential(l.chain(opts.batch_norm)),
      options(opts),
      fc(*l.fc),
      t1(*l.t1),
      t2(*l.t2),
      t3(*l.t3),
      bn0(*l.bn0),
      bn1(*l.bn1),
      bn2(*l.bn2) {
  if (!opts.batch_norm) unused_ = {l.bn0, l.bn1, l.bn2};
}
Tensor DcganGenerator::forward(const Tensor& z) {
  check_noise(z, "DcganGenerator");
  return nn::Sequential::forward(z);
}

struct DcganDiscriminator::Layers {
  std::shared_ptr<nn::Conv2d> c1 = nn::make<nn::Conv2d>(1, 64, 5, nn::Conv2dOptions{.stride = 2, .padding = 2}),
                              c2 = nn::make<nn::Conv2d>(64, 128, 5, nn::Conv2dOptions{.stride = 2, .padding = 2});
  std::shared_ptr<nn::Dropout> d1 = nn::make<nn::Dropout>(0.3), d2 = nn::make<nn::Dropout>(0.3);
  std::shared_ptr<nn::Linear> fc = nn::make<nn::Linear>(7 * 7 * 128, 1);
};
DcganDiscriminator::DcganDiscriminator() : DcganDiscriminator(Layers{}) {}
DcganDiscriminator::DcganDiscriminator(const Layers& l)
    : nn::Sequential({{"c1", l.c1},
                      {"lrelu1", nn::make<nn::LeakyReLU>(0.2)},
                      {"d1", l.d1},  // 14x14
                      {"c2", l.c2},
                      {"lrelu2", nn::make<nn::LeakyReLU>(0.2)},
                      {"d2", l.d2},  // 7x7
                      {"flatten", nn::make<nn::Flatten>()},
                      {"fc", l.fc}}),
      c1(*l.c1),
      c2(*l.c2),
      d1(*l.d1),
      d2(*l.d2),
      fc(*l.fc) {}
Tensor DcganDiscriminator::forward(const Tensor& x) {
  check_image(x, "DcganDiscriminator");
  return nn::Sequential::forward(x);
}

}  // namespace ember::models
