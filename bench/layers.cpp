// bench/layers: the training API's hot layers on the CPU beside the same layers in libtorch,
// measured in the same run with the same thread count: conv2d forward and backward GFLOP/s at the
// MNIST CNN's three conv shapes (batch 64) and a ResNet-style 3x3 64->64 56x56 layer (batch 8),
// max-pooling GB/s, one-layer LSTM time steps per second (hidden 128 and 512) and optimizer steps
// per second (SGD with momentum, Adam) over about a million parameters. Ratio = Ember rate /
// libtorch rate (1.00 = parity, higher is better); "n/a" when CMake found no libtorch.
//
//   layers [--threads N] [--reps R] [--only SUBSTRING]   (--only: the rows whose name contains it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/layers_ref.h"
#include "core/autograd/engine.h"
#include "core/parallel.h"
#include "layers/nn.h"

using namespace ember;
using namespace ember::bench;
namespace ref = ember::bench::torchref;

namespace {

int g_reps = 7;
std::string g_only;  // --only: run the rows whose name contains this

bool wanted(const std::string& what) {
  return g_only.empty() || what.find(g_only) != std::string::npos;
}

struct Times {
  double ember = 0, torch = 0;  // median seconds per call; torch 0 without libtorch
};

// Times the Ember call and the libtorch call interleaved, round by round, so that both see the
// same load on a shared machine: each is calibrated to about 50 ms per measurement, one warm-up
// round, then g_reps rounds; the medians are returned.
Times compare(const std::function<void()>& ember_call, const ref::Call& torch_call) {
  auto batch = [](const std::function<void()>& f, int n) {
    const auto a = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / n;
  };
  const int ne = calibrate(ember_call), nt = torch_call ? calibrate(torch_call) : 0;
  std::vector<double> te, tt;
  for (int r = 0; r <= g_reps; ++r) {
    const double e = batch(ember_call, ne);
    const double t = torch_call ? batch(torch_call, nt) : 0;
    if (r == 0) continue;  // warm-up round
    te.push_back(e);
    tt.push_back(t);
  }
  std::sort(te.begin(), te.end());
  std::sort(tt.begin(), tt.end());
  return {te[te.size() / 2], tt[tt.size() / 2]};
}

// Adds a row "what | size | ember rate | libtorch rate | ratio"; work / seconds = rate.
void row(Table& t, const std::string& what, const std::string& size, double work, const char* unit,
         const std::function<void()>& ember_call, const ref::Call& torch_call) {
  if (!wanted(what)) return;
  const Times times = compare(ember_call, torch_call);
  const double ember_s = times.ember, torch_s = times.torch;
  const double er = work / ember_s;
  std::vector<std::string> r{what, size, fmt(er, "%.2f") + " " + unit, fmt(ember_s * 1e3, "%.3f")};
  if (ref::available()) {
    const double tr = work / torch_s;
    r.push_back(fmt(tr, "%.2f") + " " + unit);
    r.push_back(fmt(torch_s * 1e3, "%.3f"));
    r.push_back(fmt(er / tr));
  } else {
    r.insert(r.end(), {"n/a", "n/a", "n/a"});
  }
  t.rows.push_back(r);
  std::fprintf(stderr, "  done: %s %s\n", what.c_str(), size.c_str());
}

std::string conv_size(const ref::ConvShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width) + " -> " + std::to_string(s.out_channels) + ", " + std::to_string(s.kernel) + "x" +
         std::to_string(s.kernel) + (s.stride > 1 ? " s" + std::to_string(s.stride) : "") +
         (s.padding ? " p" + std::to_string(s.padding) : "");
}

void bench_conv(Table& t, const std::string& name, const ref::ConvShape& s) {
  nn::Conv2d conv(s.in_channels, s.out_channels, s.kernel, {.stride = s.stride, .padding = s.padding});
  Tensor x = randn({s.batch, s.in_channels, s.height, s.width}).requires_grad_(true);
  Tensor y = conv(x);
  Tensor g = randn(y.shape());
  const double flops = 2.0 * static_cast<double>(y.numel()) * static_cast<double>(s.in_channels * s.kernel * s.kernel);
  auto fwd = [&] { Tensor out = conv(x); };
  auto bwd = [&] { autograd::grad({y}, {x, conv.weight, conv.bias}, {g}, true); };
  row(t, "conv2d fwd " + name, conv_size(s), flops / 1e9, "GFLOP/s", fwd, ref::conv2d_forward(s));
  // The input and weight gradients are each as many multiply-adds as the forward.
  row(t, "conv2d bwd " + name, conv_size(s), 2 * flops / 1e9, "GFLOP/s", bwd, ref::conv2d_backward(s));
}

void bench_pool(Table& t, const std::string& name, const ref::PoolShape& s) {
  Tensor x = randn({s.batch, s.channels, s.height, s.width}).requires_grad_(true);
  nn::MaxPool2d pool(s.kernel, {.stride = s.stride, .padding = s.padding});
  Tensor y = pool(x);
  Tensor g = randn(y.shape());
  const double in_bytes = 4.0 * static_cast<double>(x.numel()), out_bytes = 4.0 * static_cast<double>(y.numel());
  const std::string size = std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" + std::to_string(s.height) +
                           "x" + std::to_string(s.width) + ", " + std::to_string(s.kernel) + "/" +
                           std::to_string(s.stride) + (s.padding ? " p" + std::to_string(s.padding) : "");
  // Bytes read and written: forward reads the input and writes the output; backward reads the
  // output gradient and writes the input gradient.
  auto fwd = [&] { Tensor out = pool(x); };
  auto bwd = [&] { autograd::grad({y}, {x}, {g}, true); };
  row(t, "max_pool2d fwd " + name, size, (in_bytes + out_bytes) / 1e9, "GB/s", fwd, ref::max_pool2d_forward(s));
  row(t, "max_pool2d bwd " + name, size, (in_bytes + out_bytes) / 1e9, "GB/s", bwd, ref::max_pool2d_backward(s));
}

void bench_lstm(Table& t, int64_t steps, int64_t batch, int64_t hidden) {
  nn::LSTM lstm(hidden, hidden);
  Tensor x = randn({steps, batch, hidden}).requires_grad_(true);
  std::vector<Tensor> wrt{x};
  for (const Tensor& p : lstm.parameters()) wrt.push_back(p);
  auto fwd_bwd = [&] {
    nn::RnnOutput o = lstm(x);
    autograd::grad({o.output.sum()}, wrt);
  };
  const std::string size = "T" + std::to_string(steps) + " B" + std::to_string(batch) + " H" + std::to_string(hidden);
  auto fwd = [&] { nn::RnnOutput o = lstm(x); };
  row(t, "lstm fwd", size, static_cast<double>(steps), "steps/s", fwd, ref::lstm_forward(steps, batch, hidden));
  row(t, "lstm fwd+bwd", size, static_cast<double>(steps), "steps/s", fwd_bwd,
      ref::lstm_forward_backward(steps, batch, hidden));
}

void bench_optim(Table& t, const std::string& kind) {
  // An MLP's parameters, 784-1024-256-10: 1,068,810 in all.
  const std::vector<int64_t> sizes{784 * 1024, 1024, 1024 * 256, 256, 256 * 10, 10};
  std::vector<Tensor> params;
  int64_t total = 0;
  for (int64_t n : sizes) {
    Tensor p = randn({n}).requires_grad_(true);
    p.set_grad(randn({n}) * 1e-3);
    params.push_back(p);
    total += n;
  }
  std::unique_ptr<optim::Optimizer> opt;
  if (kind == "sgd")
    opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  else
    opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-3});
  row(
      t, kind == "sgd" ? "SGD momentum step" : "Adam step", std::to_string(total) + " params", 1.0, "steps/s",
      [&] { opt->step(); }, ref::optimizer_step(kind, sizes.data(), static_cast<int>(sizes.size())));
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(
            argc, argv,
            "usage: %s [--threads N] [--reps R] [--only SUBSTRING]\n\nTimes convolution, pooling, LSTM and optimizer "
            "steps beside libtorch (when built with it).\n"))
      return 0;
    int threads = get_num_threads();
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
        threads = std::atoi(argv[++i]);
      } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
        g_only = argv[++i];
      } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
        g_reps = std::atoi(argv[++i]);
      } else {
        std::fprintf(stderr, "usage: %s [--threads N] [--reps R] [--only SUBSTRING]\n", argv[0]);
        return 2;
      }
    }
    if (threads < 1 || g_reps < 1) {
      std::fprintf(stderr, "layers: --threads and --reps must be at least 1\n");
      return 2;
    }
    set_num_threads(threads);  // OpenMP and OpenBLAS
    ref::set_threads(threads);
    print_cpu_line();
    std::printf("bench/layers: %d thread(s), median of %d interleaved runs after warm-up; libtorch %s\n", threads,
                g_reps, ref::version().c_str());
    std::printf("ratio = Ember rate / libtorch rate (1.00 = parity, higher is better)\n\n");

    Table t{{"what", "size", "ember", "ember ms", "libtorch", "libtorch ms", "ratio"}, {}};
    bench_conv(t, "mnist c1", {64, 1, 32, 28, 28, 3, 0});
    bench_conv(t, "mnist c2", {64, 32, 64, 13, 13, 3, 0});
    bench_conv(t, "mnist c3", {64, 64, 64, 5, 5, 3, 0});
    bench_conv(t, "resnet 3x3", {8, 64, 64, 56, 56, 3, 1});
    // The convolution the DCGAN generator's first transposed convolution (256 -> 128, 7x7) inverts:
    // its forward is that layer's input gradient, its backward that layer's forward and weights.
    bench_conv(t, "dcgan t1 as conv", {64, 128, 256, 7, 7, 5, 2});
    // The discriminator's second convolution; the generator's second transposed one inverts it.
    bench_conv(t, "dcgan d2", {64, 64, 128, 14, 14, 5, 2, 2});
    bench_pool(t, "mnist", {64, 32, 26, 26, 2, 2, 0});
    bench_pool(t, "resnet stem", {8, 64, 112, 112, 3, 2, 1});
    bench_lstm(t, 32, 32, 128);
    bench_lstm(t, 32, 32, 512);
    bench_optim(t, "sgd");
    bench_optim(t, "adam");
    std::printf("\n");
    t.print();
    return 0;
  });
}
