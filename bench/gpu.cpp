// bench/gpu: Ember's own CUDA kernels against the vendor libraries on the same GPU, in one run.
//   SGEMM native vs cuBLAS at 1024..8192 (target: native >= 90% of cuBLAS fp32 at 4096^3)
//   conv2d forward and backward native vs cuDNN at the MNIST CNN's and a ResNet 3x3 layer's
//   shapes (target: native >= 80% of cuDNN)
//   LSTM layer native vs cuDNN RNN
//   MnistCnn (batch 64) and DCGAN training samples/s, and Ember kernel launches per training step
// A row whose implementation is missing (no GPU, no native kernel registered, no vendor path)
// prints "n/a" and why; nothing is estimated. Usage: gpu [--quick] (--quick: fewer sizes and
// repetitions, for scripts/gpu-check.sh's time budget); gpu --tiles: the SGEMM tile sweep; gpu --ncu:
// one native SGEMM and conv for Nsight Compute (both below).
#include <ember/config.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/autograd/grad_mode.h"
#include "core/kernel_choice.h"
#include "core/ops.h"
#include "core/stream.h"
#include "layers/nn.h"
#include "layers/optim/adam.h"
#include "models/gan.h"
#include "models/mnist_cnn.h"
#if EMBER_WITH_CUDA
#include "core/cuda/launch_count.h"
#endif

using namespace ember;
using bench::Table;

namespace {

const Device kGpu = Device::cuda(0);
bool g_quick = false;

void sync() {
  get_stream(kGpu).synchronize();
}

// Median seconds of f on the GPU (each run synchronised), under a kernel choice.
double time_with(KernelFamily fam, KernelChoice c, const std::function<void()>& f) {
  set_kernel_choice(fam, c);
  auto run = [&] {
    f();
    sync();
  };
  return bench::median_seconds(run, g_quick ? 3 : 7, 1);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// One comparison row: native and vendor timed when both exist, else n/a with the reason.
void compare(Table& t, const std::string& what, const std::string& size, KernelFamily fam, double flops,
             const std::function<void()>& f) {
  const bool nat = has_native(fam), ven = has_vendor(fam);
  std::string n = "n/a (no native kernel)", v = "n/a (no vendor path)", ratio = "n/a";
  double tn = 0, tv = 0;
  try {
    if (nat) tn = time_with(fam, KernelChoice::Native, f);
    if (ven) tv = time_with(fam, KernelChoice::Vendor, f);
  } catch (const Error& e) {
    t.rows.push_back({what, size, std::string("error: ") + e.what(), "", ""});
    return;
  }
  auto cell = [&](double s) {
    return flops > 0 ? fmt("%.3f ms ", s * 1e3) + fmt("(%.1f TFLOP/s)", flops / s / 1e12) : fmt("%.3f ms", s * 1e3);
  };
  if (nat) n = cell(tn);
  if (ven) v = cell(tv);
  if (nat && ven) ratio = fmt("%.2f", tv / tn);
  t.rows.push_back({what, size, n, v, ratio});
  set_kernel_choice(fam, KernelChoice::Auto);
}

void gemm_rows(Table& t) {
  std::vector<int64_t> sizes = {1024, 2048, 4096, 8192};
  if (g_quick) sizes = {1024, 4096};
  for (int64_t n : sizes) {
    Tensor a = randn({n, n}, {.device = kGpu}), b = randn({n, n}, {.device = kGpu});
    compare(t, "sgemm", std::to_string(n) + "^3", KernelFamily::Gemm, 2.0 * n * n * n, [&] { (void)matmul(a, b); });
  }
}

struct ConvShape {
  const char* name;
  int64_t N, C, H, W, OC, K, pad;
};

void conv_rows(Table& t) {
  const ConvShape shapes[] = {{"mnist conv1", 64, 1, 28, 28, 32, 3, 0},
                              {"mnist conv2", 64, 32, 13, 13, 64, 3, 0},
                              {"mnist conv3", 64, 64, 5, 5, 64, 3, 0},
                              {"resnet 3x3", 32, 64, 56, 56, 64, 3, 1}};
  for (const ConvShape& s : shapes) {
    Tensor x = randn({s.N, s.C, s.H, s.W}, {.device = kGpu}).requires_grad_(true);
    Tensor w = randn({s.OC, s.C, s.K, s.K}, {.device = kGpu}).requires_grad_(true);
    const int64_t OH = s.H + 2 * s.pad - s.K + 1;
    const double flops = 2.0 * s.N * s.OC * OH * OH * s.C * s.K * s.K;
    const std::string size = std::to_string(s.N) + "x" + std::to_string(s.C) + "x" + std::to_string(s.H) + "x" +
                             std::to_string(s.W) + " -> " + std::to_string(s.OC);
    Conv2dParams p{.padding = {s.pad, s.pad}};
    compare(t, std::string(s.name) + " fwd", size, KernelFamily::Conv, flops, [&] {
      NoGradGuard ng;
      (void)conv2d(x, w, Tensor(), p);
    });
    Tensor gy = randn({s.N, s.OC, OH, OH}, {.device = kGpu});
    compare(t, std::string(s.name) + " fwd+bwd", size, KernelFamily::Conv, 3 * flops, [&] {
      x.set_grad(Tensor());
      w.set_grad(Tensor());
      conv2d(x, w, Tensor(), p).backward(gy);
    });
  }
}

void lstm_rows(Table& t) {
  const int64_t T = 35, B = 64, I = 512, H = 512;
  Tensor x = randn({T, B, I}, {.device = kGpu}).requires_grad_(true);
  Tensor wih = randn({4 * H, I}, {.device = kGpu}).mul_(0.05).requires_grad_(true);
  Tensor whh = randn({4 * H, H}, {.device = kGpu}).mul_(0.05).requires_grad_(true);
  Tensor bih = zeros({4 * H}, {.device = kGpu}), bhh = zeros({4 * H}, {.device = kGpu});
  const double flops = 2.0 * T * B * 4 * H * (I + H);
  compare(t, "lstm fwd", "T35 B64 512->512", KernelFamily::Rnn, flops, [&] {
    NoGradGuard ng;
    (void)rnn_layer(RnnMode::Lstm, x, wih, whh, bih, bhh, Tensor(), Tensor());
  });
  compare(t, "lstm fwd+bwd", "T35 B64 512->512", KernelFamily::Rnn, 3 * flops,
          [&] { sum(rnn_layer(RnnMode::Lstm, x, wih, whh, bih, bhh, Tensor(), Tensor()).output).backward(); });
}

// Samples/s of full training steps (forward, loss, backward, Adam) and Ember launches per step,
// with the default (auto) kernel choice.
void training_rows(Table& t) {
  const int64_t batch = 64;
  // A step of these models on an H200 is well under a millisecond of host launches, so a sample is
  // many steps, and the median of several samples: with 30 steps and three samples the rows moved
  // 1.5x between runs on a lent H200 while the kernel rows did not.
  const int steps = g_quick ? 50 : 200;
  const int samples = g_quick ? 3 : 7;
  auto report = [&](const std::string& what, const std::function<void()>& step) {
    for (int i = 0; i < 3; ++i) step();  // warm-up: auto's timing, allocator, library init
    sync();
#if EMBER_WITH_CUDA
    const uint64_t l0 = cuda::kernel_launch_count();
#endif
    const double s = bench::median_seconds(
        [&] {
          for (int i = 0; i < steps; ++i) step();
          sync();
        },
        samples, 0);
    std::string launches = "n/a";
#if EMBER_WITH_CUDA
    const double runs = static_cast<double>(samples) * steps;
    launches = fmt("%.0f", static_cast<double>(cuda::kernel_launch_count() - l0) / runs);
#endif
    t.rows.push_back({what, "batch 64", fmt("%.0f samples/s", batch * steps / s), launches, ""});
  };
  try {
    models::MnistCnn net;
    nn::fuse(net);  // as the example trains it
    net.to(kGpu);
    optim::Adam opt(net.parameters(), {.lr = 1e-3});
    Tensor x = randn({batch, 1, 28, 28}, {.device = kGpu});
    Tensor y = randint(0, 10, {batch}, {.dtype = DType::Int64, .device = kGpu});
    report("MnistCnn train step", [&] {
      Tensor loss = cross_entropy(net.forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    });
  } catch (const Error& e) {
    t.rows.push_back({"MnistCnn train step", "batch 64", std::string("n/a: ") + e.what(), "", ""});
  }
  try {
    models::DcganGenerator g;
    models::DcganDiscriminator d;
    g.to(kGpu);
    d.to(kGpu);
    optim::Adam og(g.parameters(), {.lr = 2e-4}), od(d.parameters(), {.lr = 2e-4});
    Tensor real = randn({batch, 1, 28, 28}, {.device = kGpu});
    Tensor ones_t = ones({batch, 1}, {.device = kGpu}), zeros_t = zeros({batch, 1}, {.device = kGpu});
    report("DCGAN train step (D+G)", [&] {
      Tensor z = randn({batch, models::kNoiseDim}, {.device = kGpu});
      Tensor fake = g.forward(z);
      Tensor ld = add(nn::binary_cross_entropy_with_logits(d.forward(real), ones_t),
                      nn::binary_cross_entropy_with_logits(d.forward(fake.detach()), zeros_t));
      od.zero_grad();
      ld.backward();
      od.step();
      Tensor lg = nn::binary_cross_entropy_with_logits(d.forward(fake), ones_t);
      og.zero_grad();
      lg.backward();
      og.step();
    });
  } catch (const Error& e) {
    t.rows.push_back({"DCGAN train step (D+G)", "batch 64", std::string("n/a: ") + e.what(), "", ""});
  }
}

// The autotune sweep (--tiles): the native float GEMM under each tile configuration that
// EMBER_GEMM_TILE names (core/cuda/gemm.cu), on a square and two of the examples' shapes; prints
// the table and, per shape, the winner. scripts/gpu-check.sh runs it on a lent GPU.
int tile_sweep() {
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{4096, 4096, 4096}, {2048, 2048, 2048}, {256, 1024, 4096}};
  const char* tiles[] = {"128x128x8", "128x64x8", "64x128x8"};
  Table t{{"sgemm m x n x k", "tile", "native", "", ""}, {}};
  for (const S& s : shapes) {
    Tensor a = randn({s.m, s.k}, {.device = kGpu}), b = randn({s.k, s.n}, {.device = kGpu});
    const double flops = 2.0 * s.m * s.n * s.k;
    std::string best;
    double best_s = 0;
    for (const char* tile : tiles) {
      setenv("EMBER_GEMM_TILE", tile, 1);
      const double sec = time_with(KernelFamily::Gemm, KernelChoice::Native, [&] { (void)matmul(a, b); });
      if (best.empty() || sec < best_s) best = tile, best_s = sec;
      t.rows.push_back({std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k), tile,
                        fmt("%.3f ms ", sec * 1e3) + fmt("(%.1f TFLOP/s)", flops / sec / 1e12), "", ""});
    }
    unsetenv("EMBER_GEMM_TILE");
    std::printf("tile winner %lldx%lldx%lld: %s (%.1f TFLOP/s)\n", static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), best.c_str(), flops / best_s / 1e12);
  }
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Auto);
  t.print();
  return 0;
}

// --ncu: one native SGEMM at 4096^3 and one native ResNet 3x3 convolution forward, after a
// warm-up each, for Nsight Compute to profile (scripts/gpu-check.sh picks the kernels by name).
int ncu_once() {
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Native);
  set_kernel_choice(KernelFamily::Conv, KernelChoice::Native);
  Tensor a = randn({4096, 4096}, {.device = kGpu}), b = randn({4096, 4096}, {.device = kGpu});
  Tensor x = randn({32, 64, 56, 56}, {.device = kGpu}), w = randn({64, 64, 3, 3}, {.device = kGpu});
  NoGradGuard ng;
  Conv2dParams p{.padding = {1, 1}};
  for (int r = 0; r < 2; ++r) {
    (void)matmul(a, b);
    (void)conv2d(x, w, Tensor(), p);
  }
  sync();
  std::printf("bench/gpu --ncu: ran sgemm 4096^3 and conv 32x64x56x56 -> 64 (3x3) twice each\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(
            argc, argv,
            "usage: %s [--quick] [--tiles | --ncu]\n\nNative CUDA kernels beside cuBLAS/cuDNN and training throughput "
            "on a GPU (n/a rows without one). --tiles: the SGEMM tile sweep (EMBER_GEMM_TILE); --ncu: one "
            "native SGEMM and conv for Nsight Compute.\n"))
      return 0;
    bool tiles = false, ncu = false;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0) {
        g_quick = true;
      } else if (std::strcmp(argv[i], "--tiles") == 0) {
        tiles = true;
      } else if (std::strcmp(argv[i], "--ncu") == 0) {
        ncu = true;
      } else {
        std::fprintf(stderr, "gpu: unknown argument '%s' (usage: gpu [--quick] [--tiles | --ncu])\n", argv[i]);
        return 2;
      }
    }
    if ((tiles || ncu) && cuda_device_count() == 0) {
      std::printf("bench/gpu: skipped: no CUDA device\n");
      return 0;
    }
    if (tiles) return tile_sweep();
    if (ncu) return ncu_once();
    Table kernels{{"kernel", "size", "native", "vendor (cuBLAS/cuDNN)", "vendor/native time"}, {}};
    Table training{{"training", "size", "throughput", "Ember launches/step", ""}, {}};
    if (cuda_device_count() == 0) {
      std::printf("bench/gpu: skipped: no CUDA device (%s)\n",
                  EMBER_WITH_CUDA ? "built with CUDA" : "built without CUDA");
      for (const char* row : {"sgemm 1024..8192", "conv fwd/bwd (MNIST CNN, ResNet 3x3)", "lstm fwd/bwd"})
        kernels.rows.push_back({row, "", "n/a (no GPU)", "n/a (no GPU)", "n/a"});
      for (const char* row : {"MnistCnn train step", "DCGAN train step (D+G)"})
        training.rows.push_back({row, "batch 64", "n/a (no GPU)", "n/a", ""});
    } else {
      gemm_rows(kernels);
      conv_rows(kernels);
      lstm_rows(kernels);
      training_rows(training);
    }
    std::printf("\nvendor/native time > 1 means Ember's kernel is faster. Medians of %d runs.\n", g_quick ? 3 : 7);
    kernels.print();
    std::printf("\n");
    training.print();
    return 0;
  });
}
