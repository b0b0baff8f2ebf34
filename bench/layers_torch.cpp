// bench/layers' reference side: the layers of bench/layers.cpp in libtorch's C++ frontend, set
// up exactly as the Ember side (same shapes, grad mode on in forward, gradients through
// autograd::grad with the graph retained). Each function returns a closure making one call; the
// closure owns everything it uses.
#include <torch/torch.h>

#include <memory>

#include "bench/layers_ref.h"

namespace ember::bench::torchref {

bool available() {
  return true;
}
std::string version() {
  return TORCH_VERSION;
}
void set_threads(int n) {
  torch::set_num_threads(n);
}

namespace {
torch::nn::Conv2d make_conv(const ConvShape& s) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(s.in_channels, s.out_channels, s.kernel).padding(s.padding).stride(s.stride).bias(true));
}
torch::Tensor conv_input(const ConvShape& s) {
  return torch::randn({s.batch, s.in_channels, s.height, s.width}).requires_grad_(true);
}
torch::nn::MaxPool2d make_pool(const PoolShape& s) {
  return torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(s.kernel).stride(s.stride).padding(s.padding));
}
torch::Tensor pool_input(const PoolShape& s) {
  return torch::randn({s.batch, s.channels, s.height, s.width}).requires_grad_(true);
}
}  // namespace

Call conv2d_forward(const ConvShape& s) {
  return [conv = make_conv(s), x = conv_input(s)]() mutable { torch::Tensor y = conv->forward(x); };
}

Call conv2d_backward(const ConvShape& s) {
  torch::nn::Conv2d conv = make_conv(s);
  torch::Tensor x = conv_input(s);
  torch::Tensor y = conv->forward(x);
  torch::Tensor g = torch::randn_like(y);
  return [conv, x, y, g] { torch::autograd::grad({y}, {x, conv->weight, conv->bias}, {g}, true); };
}

Call max_pool2d_forward(const PoolShape& s) {
  return [pool = make_pool(s), x = pool_input(s)]() mutable { torch::Tensor y = pool->forward(x); };
}

Call max_pool2d_backward(const PoolShape& s) {
  torch::nn::MaxPool2d pool = make_pool(s);
  torch::Tensor x = pool_input(s);
  torch::Tensor y = pool->forward(x);
  torch::Tensor g = torch::randn_like(y);
  return [x, y, g] { torch::autograd::grad({y}, {x}, {g}, true); };
}

Call lstm_forward(int64_t steps, int64_t batch, int64_t hidden) {
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(hidden, hidden));
  torch::Tensor x = torch::randn({steps, batch, hidden}).requires_grad_(true);
  return [lstm, x]() mutable { auto out = lstm->forward(x); };
}

Call lstm_forward_backward(int64_t steps, int64_t batch, int64_t hidden) {
  torch::nn::LSTM lstm(torch::nn::LSTMOptions(hidden, hidden));
  torch::Tensor x = torch::randn({steps, batch, hidden}).requires_grad_(true);
  std::vector<torch::Tensor> wrt{x};
  for (const auto& p : lstm->parameters()) wrt.push_back(p);
  return [lstm, x, wrt]() mutable {
    torch::Tensor out = std::get<0>(lstm->forward(x));
    torch::autograd::grad({out.sum()}, wrt);
  };
}

Call optimizer_step(const std::string& kind, const int64_t* sizes, int count) {
  std::vector<torch::Tensor> params;
  for (int i = 0; i < count; ++i) {
    torch::Tensor p = torch::randn({sizes[i]}).requires_grad_(true);
    p.mutable_grad() = torch::randn({sizes[i]}) * 1e-3;
    params.push_back(p);
  }
  std::shared_ptr<torch::optim::Optimizer> opt;
  if (kind == "sgd")
    opt = std::make_shared<torch::optim::SGD>(params, torch::optim::SGDOptions(0.01).momentum(0.9));
  else
    opt = std::make_shared<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-3));
  return [opt] { opt->step(); };
}

}  // namespace ember::bench::torchref
