// libtorch versions of bench/train's models (see train_torch.h).
#include "bench/train_torch.h"

#include <torch/torch.h>

#include <memory>

#include "bench/workloads.h"

namespace ember::bench {

namespace {

namespace tnn = torch::nn;

struct TorchMnistCnn : tnn::Module {
  tnn::Conv2d c1{nullptr}, c2{nullptr}, c3{nullptr};
  tnn::Linear f1{nullptr}, f2{nullptr};
  TorchMnistCnn() {
    c1 = register_module("c1", tnn::Conv2d(1, 32, 3));
    c2 = register_module("c2", tnn::Conv2d(32, 64, 3));
    c3 = register_module("c3", tnn::Conv2d(64, 64, 3));
    f1 = register_module("f1", tnn::Linear(576, 64));
    f2 = register_module("f2", tnn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    x = torch::relu(c3(x)).flatten(1);
    return f2(torch::relu(f1(x)));
  }
};

struct TorchMlpG : tnn::Module {
  tnn::Linear l1{nullptr}, l2{nullptr};
  TorchMlpG() {
    l1 = register_module("l1", tnn::Linear(100, 256));
    l2 = register_module("l2", tnn::Linear(256, 784));
  }
  torch::Tensor forward(torch::Tensor z) { return torch::tanh(l2(torch::relu(l1(z)))).view({z.size(0), 1, 28, 28}); }
};
struct TorchMlpD : tnn::Module {
  tnn::Linear l1{nullptr}, l2{nullptr};
  TorchMlpD() {
    l1 = register_module("l1", tnn::Linear(784, 256));
    l2 = register_module("l2", tnn::Linear(256, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return torch::sigmoid(l2(torch::leaky_relu(l1(x.flatten(1)), 0.2))); }
};

// models::DcganGenerator with its default batch_norm: batch norm after fc, t1 and t2, which have
// no bias then (a BatchNorm1d over the 12544 fc features, BatchNorm2d after the deconvolutions).
struct TorchDcganG : tnn::Module {
  tnn::Linear fc{nullptr};
  tnn::BatchNorm1d bn0{nullptr};
  tnn::ConvTranspose2d t1{nullptr}, t2{nullptr}, t3{nullptr};
  tnn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  TorchDcganG() {
    fc = register_module("fc", tnn::Linear(tnn::LinearOptions(100, 7 * 7 * 256).bias(false)));
    bn0 = register_module("bn0", tnn::BatchNorm1d(7 * 7 * 256));
    t1 = register_module(
        "t1", tnn::ConvTranspose2d(tnn::ConvTranspose2dOptions(256, 128, 5).stride(1).padding(2).bias(false)));
    bn1 = register_module("bn1", tnn::BatchNorm2d(128));
    t2 = register_module("t2", tnn::ConvTranspose2d(
                                   tnn::ConvTranspose2dOptions(128, 64, 5).stride(2).padding(2).output_padding(1).bias(false)));
    bn2 = register_module("bn2", tnn::BatchNorm2d(64));
    t3 = register_module(
        "t3", tnn::ConvTranspose2d(tnn::ConvTranspose2dOptions(64, 1, 5).stride(2).padding(2).output_padding(1)));
  }
  torch::Tensor forward(torch::Tensor z) {
    auto h = torch::leaky_relu(bn0(fc(z)), 0.2).view({z.size(0), 256, 7, 7});
    h = torch::leaky_relu(bn1(t1(h)), 0.2);
    h = torch::leaky_relu(bn2(t2(h)), 0.2);
    return torch::tanh(t3(h));
  }
};
struct TorchDcganD : tnn::Module {
  tnn::Conv2d c1{nullptr}, c2{nullptr};
  tnn::Dropout d1{nullptr}, d2{nullptr};
  tnn::Linear fc{nullptr};
  TorchDcganD() {
    c1 = register_module("c1", tnn::Conv2d(tnn::Conv2dOptions(1, 64, 5).stride(2).padding(2)));
    c2 = register_module("c2", tnn::Conv2d(tnn::Conv2dOptions(64, 128, 5).stride(2).padding(2)));
    d1 = register_module("d1", tnn::Dropout(0.3));
    d2 = register_module("d2", tnn::Dropout(0.3));
    fc = register_module("fc", tnn::Linear(7 * 7 * 128, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto h = d1(torch::leaky_relu(c1(x), 0.2));
    h = d2(torch::leaky_relu(c2(h), 0.2));
    return fc(h.flatten(1));
  }
};

// One GAN step exactly as the examples take it: D on real and detached fake, then G through D.
template <class G, class D>
std::function<void()> gan_step(int batch, bool logits) {
  auto g = std::make_shared<G>();
  auto d = std::make_shared<D>();
  auto og = std::make_shared<torch::optim::Adam>(g->parameters(), torch::optim::AdamOptions(2e-4).betas({0.5, 0.999}));
  auto od = std::make_shared<torch::optim::Adam>(d->parameters(), torch::optim::AdamOptions(2e-4).betas({0.5, 0.999}));
  auto real = torch::rand({batch, 1, 28, 28}) * 2 - 1;
  built_batch() = static_cast<int>(real.size(0));
  auto ones = torch::ones({batch, 1}), zeros = torch::zeros({batch, 1});
  auto loss = [logits](const torch::Tensor& out, const torch::Tensor& t) {
    return logits ? torch::binary_cross_entropy_with_logits(out, t) : torch::binary_cross_entropy(out, t);
  };
  return [=] {
    auto fake = g->forward(torch::randn({batch, 100}));
    auto ld = loss(d->forward(real), ones) + loss(d->forward(fake.detach()), zeros);
    od->zero_grad();
    ld.backward();
    od->step();
    auto lg = loss(d->forward(fake), ones);
    og->zero_grad();
    lg.backward();
    og->step();
  };
}

}  // namespace

bool torch_available() {
  return true;
}

std::function<void()> torch_train_step(const std::string& model, int batch, int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  if (model == "mnist_cnn") {
    auto net = std::make_shared<TorchMnistCnn>();
    auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
    auto x = torch::randn({batch, 1, 28, 28});
    built_batch() = static_cast<int>(x.size(0));
    auto y = torch::randint(0, 10, {batch}, torch::kLong);
    return [=] {
      auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      opt->zero_grad();
      loss.backward();
      opt->step();
    };
  }
  if (model == "mlp_gan") return gan_step<TorchMlpG, TorchMlpD>(batch, false);
  if (model == "dcgan") return gan_step<TorchDcganG, TorchDcganD>(batch, true);
  return {};
}

}  // namespace ember::bench
