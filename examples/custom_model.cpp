// A new model written through the C++ API: a small convolutional network with batch
// normalisation and a residual block, trained on MNIST (or Fashion-MNIST) by the training
// library's loop (train/classifier.h over train/trainer.h: progress bar, metrics log, evaluation each epoch,
// checkpoints, resume). Copy this file, change the model, and train.
#include "layers/nn.h"
#include "train/classifier.h"

using namespace ember;

// conv(1->32)+BN+ReLU, max-pool, a residual block of two 3x3 convs at 32 channels, max-pool,
// global average pool, Linear(32->10).
struct ResidualNet : nn::Module {
  nn::Conv2d stem{1, 32, 3, {.padding = 1}}, conv1{32, 32, 3, {.padding = 1}}, conv2{32, 32, 3, {.padding = 1}};
  nn::BatchNorm2d bn0{32}, bn1{32}, bn2{32};
  nn::Linear head{32, 10};

  ResidualNet() {
    register_modules({{"stem", &stem},
                      {"bn0", &bn0},
                      {"conv1", &conv1},
                      {"bn1", &bn1},
                      {"conv2", &conv2},
                      {"bn2", &bn2},
                      {"head", &head}});
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(bn0(stem(x))), 2);  // 14x14
    Tensor r = bn2(conv2(relu(bn1(conv1(h)))));    // the residual branch
    h = max_pool2d(relu(h + r), 2);                // 7x7
    return head(mean(h, {2, 3}));                  // global average pool -> logits
  }
  std::string type_name() const override { return "ResidualNet"; }
};

int main(int argc, char** argv) {
  train::Flags flags(argc, argv,
                     "Trains a small residual CNN written in this file on MNIST (Fashion-MNIST when --data\n"
                     "holds no MNIST files). Example: custom_model --epochs 2");
  train::CommonFlags cf(flags, /*epochs=*/2, /*batch=*/64, /*lr=*/2e-3, "custom_model");
  flags.finish();
  cf.check(flags);
  try {
    cf.prepare();  // the data first: bad data leave no empty --checkpoint-dir behind
    manual_seed(static_cast<uint64_t>(cf.seed));
    ResidualNet net;
    return train::train_mnist_classifier(net, "ResidualNet", cf);
  } catch (const std::exception& e) {
    return train::report_failure("custom_model", e);
  }
}
