// bench/gpu: Ember's own CUDA kernels against the vendor libraries on the same GPU, in one run.
//   SGEMM native vs cuBLAS at 1024..8192 (target: native >= 90% of cuBLAS fp32 at 4096^3)
//   bfloat16 and float16 GEMM on the tensor cores vs cuBLAS at 2048..8192 (target: >= 80% at
//   4096^3-8192^3)
//   conv2d forward and backward native vs cuDNN at the MNIST CNN's and a ResNet 3x3 layer's
//   shapes (target: native >= 80% of cuDNN), in float32, bfloat16 and float16 (tensor cores both
//   sides in 16 bits)
//   LSTM layer native vs cuDNN RNN
//   MnistCnn (batch 64) and DCGAN training samples/s, Ember kernel launches and host waits
//   (reads of device memory) per training step, in float32, under autocast(cuda, bfloat16), and
//   under autocast(cuda, float16) with a GradScaler (whose step should wait on nothing)
// A row whose implementation is missing (no GPU, no native kernel registered, no vendor path)
// prints "n/a" and why; nothing is estimated. Usage: gpu [--quick] (--quick: fewer sizes and
// repetitions, for scripts/gpu-check.sh's time budget); gpu --tiles [--write-tuned DIR]: the SGEMM tile sweep; gpu
// --ncu: one native SGEMM and conv for Nsight Compute (both below).
#include <ember/config.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/atomic_file.h"
#include "core/autograd/grad_mode.h"
#include "core/cuda/gemm_tuning_header.h"
#include "core/host_waits.h"
#include "core/kernel_choice.h"
#include "core/ops.h"
#include "core/ops/autocast.h"
#include "core/stream.h"
#include "layers/nn.h"
#include "layers/optim/adam.h"
#include "layers/optim/grad_scaler.h"
#include "models/gan.h"
#include "models/mnist_cnn.h"
#if EMBER_WITH_CUDA
#include "core/cuda/backend_info.h"
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

// Today in UTC, as 2026-12-06.
std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char b[16];
  std::strftime(b, sizeof b, "%Y-%m-%d", &tm);
  return b;
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

// "bf16" or "fp16", the rows' prefix (gpu-check reads such rows against the 16-bit dense peak).
const char* prefix_of(DType dt) {
  return dt == DType::BFloat16 ? "bf16 " : dt == DType::Float16 ? "fp16 " : "";
}

// 16-bit GEMM (float32 accumulation, 16-bit C): the tensor-core kernel (core/cuda/gemm_bf16_mma.h)
// beside cuBLAS's cublasGemmEx.
void lowp_gemm_rows(Table& t, DType dt) {
  std::vector<int64_t> sizes = {2048, 4096, 8192};
  if (g_quick) sizes = {4096};
  for (int64_t n : sizes) {
    Tensor a = randn({n, n}, {.device = kGpu}).to(dt), b = randn({n, n}, {.device = kGpu}).to(dt);
    compare(t, std::string(prefix_of(dt)) + "gemm", std::to_string(n) + "^3", KernelFamily::Gemm, 2.0 * n * n * n,
            [&] { (void)matmul(a, b); });
  }
}

struct ConvShape {
  const char* name;
  int64_t N, C, H, W, OC, K, pad;
};

// float32, or bfloat16 / float16 (the tensor-core kernel, core/cuda/conv_bf16_mma.h, beside
// cuDNN's BFLOAT16 / PSEUDO_HALF configurations) on the MNIST CNN's second layer and the ResNet layer.
void conv_rows(Table& t, DType dt) {
  const bool lowp = dt != DType::Float32;
  std::vector<ConvShape> shapes = {{"mnist conv1", 64, 1, 28, 28, 32, 3, 0},
                                   {"mnist conv2", 64, 32, 13, 13, 64, 3, 0},
                                   {"mnist conv3", 64, 64, 5, 5, 64, 3, 0},
                                   {"resnet 3x3", 32, 64, 56, 56, 64, 3, 1}};
  if (lowp) shapes = {shapes[1], shapes[3]};
  for (const ConvShape& s : shapes) {
    Tensor x = randn({s.N, s.C, s.H, s.W}, {.device = kGpu}).to(dt).requires_grad_(true);
    Tensor w = randn({s.OC, s.C, s.K, s.K}, {.device = kGpu}).to(dt).requires_grad_(true);
    const int64_t OH = s.H + 2 * s.pad - s.K + 1;
    const double flops = 2.0 * s.N * s.OC * OH * OH * s.C * s.K * s.K;
    const std::string size = std::to_string(s.N) + "x" + std::to_string(s.C) + "x" + std::to_string(s.H) + "x" +
                             std::to_string(s.W) + " -> " + std::to_string(s.OC);
    Conv2dParams p{.padding = {s.pad, s.pad}};
    const std::string name = prefix_of(dt) + std::string(s.name);
    compare(t, name + " fwd", size, KernelFamily::Conv, flops, [&] {
      NoGradGuard ng;
      (void)conv2d(x, w, Tensor(), p);
    });
    Tensor gy = randn({s.N, s.OC, OH, OH}, {.device = kGpu}).to(dt);
    compare(t, name + " fwd+bwd", size, KernelFamily::Conv, 3 * flops, [&] {
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
  // The vendor side is Ember's cuDNN path (core/cuda/rnn_cudnn.cpp), not cuDNN at its best: it
  // copies the weights into cuDNN's layout at every call and runs the forward again in training
  // mode inside backward for the reserve space; the rows' names say so.
  compare(t, "lstm fwd (Ember's cuDNN path)", "T35 B64 512->512", KernelFamily::Rnn, flops, [&] {
    NoGradGuard ng;
    (void)rnn_layer(RnnMode::Lstm, x, wih, whh, bih, bhh, Tensor(), Tensor());
  });
  compare(t, "lstm fwd+bwd (Ember's cuDNN path)", "T35 B64 512->512", KernelFamily::Rnn, 3 * flops,
          [&] { sum(rnn_layer(RnnMode::Lstm, x, wih, whh, bih, bhh, Tensor(), Tensor()).output).backward(); });
}

// The backward and optimizer part of a bench step at its precision: plain in float32 and
// bfloat16, through a GradScaler in float16 (the skip decided on the device, no host wait).
struct Stepper {
  optim::GradScaler scaler;
  explicit Stepper(std::optional<DType> low) : scaler({.enabled = low == DType::Float16}) {}
  void backward_step(const Tensor& loss, optim::Optimizer& opt) {
    opt.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(opt);
  }
};

std::string precision_suffix(std::optional<DType> low) {
  if (!low) return "";
  return *low == DType::BFloat16 ? " (bf16 autocast)" : " (fp16 autocast + GradScaler)";
}

// Samples/s of full training steps (forward, loss, backward, Adam), Ember launches and host waits
// per step, with the default (auto) kernel choice; `step` runs under autocast(cuda, low) when set
// (the forward in the scope, as a training loop runs it).
void report_step(Table& t, const std::string& what, std::optional<DType> low,
                 const std::function<void(Stepper&)>& step) {
  const int64_t batch = 64;
  // A step of these models on an H200 is well under a millisecond of host launches, so a sample is
  // many steps, and the median of several samples: with 30 steps and three samples the rows moved
  // 1.5x between runs on a lent H200 while the kernel rows did not.
  const int steps = g_quick ? 50 : 200;
  const int samples = g_quick ? 3 : 7;
  const std::string name = what + precision_suffix(low);
  try {
    Stepper stepper(low);
    auto run = [&] {
      std::optional<autocast> ac;
      if (low) ac.emplace(kGpu, *low);
      step(stepper);
    };
    for (int i = 0; i < 3; ++i) run();  // warm-up: auto's timing, allocator, library init
    sync();
    const uint64_t w0 = host_wait_count();
#if EMBER_WITH_CUDA
    const uint64_t l0 = cuda::kernel_launch_count();
#endif
    const double s = bench::median_seconds(
        [&] {
          for (int i = 0; i < steps; ++i) run();
          sync();
        },
        samples, 0);
    const double runs = static_cast<double>(samples) * steps;
    std::string launches = "n/a";
#if EMBER_WITH_CUDA
    launches = fmt("%.0f", static_cast<double>(cuda::kernel_launch_count() - l0) / runs);
#endif
    const std::string waits = fmt("%.2f", static_cast<double>(host_wait_count() - w0) / runs);
    t.rows.push_back({name, "batch 64", fmt("%.0f samples/s", batch * steps / s), launches, waits});
  } catch (const Error& e) {
    t.rows.push_back({name, "batch 64", std::string("n/a: ") + e.what(), "", ""});
  }
}

void mnist_row(Table& t, std::optional<DType> low) {
  models::MnistCnn net;
  nn::fuse(net);  // as the example trains it
  net.to(kGpu);
  optim::Adam opt(net.parameters(), {.lr = 1e-3});
  Tensor x = randn({64, 1, 28, 28}, {.device = kGpu});
  Tensor y = randint(0, 10, {64}, {.dtype = DType::Int64, .device = kGpu});
  report_step(t, "MnistCnn train step", low, [&](Stepper& st) {
    st.backward_step(cross_entropy(net.forward(x), y), opt);
    st.scaler.update();
  });
}

void dcgan_row(Table& t, std::optional<DType> low) {
  const int64_t batch = 64;
  models::DcganGenerator g;
  models::DcganDiscriminator d;
  g.to(kGpu);
  d.to(kGpu);
  optim::Adam og(g.parameters(), {.lr = 2e-4}), od(d.parameters(), {.lr = 2e-4});
  Tensor real = randn({batch, 1, 28, 28}, {.device = kGpu});
  Tensor ones_t = ones({batch, 1}, {.device = kGpu}), zeros_t = zeros({batch, 1}, {.device = kGpu});
  report_step(t, "DCGAN train step (D+G)", low, [&](Stepper& st) {
    Tensor z = randn({batch, models::kNoiseDim}, {.device = kGpu});
    Tensor fake = g.forward(z);
    st.backward_step(add(nn::binary_cross_entropy_with_logits(d.forward(real), ones_t),
                         nn::binary_cross_entropy_with_logits(d.forward(fake.detach()), zeros_t)),
                     od);
    st.backward_step(nn::binary_cross_entropy_with_logits(d.forward(fake), ones_t), og);
    st.scaler.update();  // once a step, after both optimizers (as torch.amp's DCGAN recipe)
  });
}

void training_rows(Table& t) {
  for (std::optional<DType> low :
       {std::optional<DType>(), std::optional<DType>(DType::BFloat16), std::optional<DType>(DType::Float16)}) {
    mnist_row(t, low);
    dcgan_row(t, low);
  }
}

// The autotune sweep (--tiles): the native float GEMM under each tile configuration
// (core/cuda/gemm_tuning.h; EMBER_GEMM_TILE forces each in turn) and cuBLAS, on the square
// sizes and the examples' shapes; prints the table and, per shape, the winner. With --write-tuned
// DIR it also writes the winners as DIR/sm<NN>.h, the tuned table the next build compiles in once
// it is copied to core/cuda/tuned/ (scripts/gpu-check.sh step 10 does this on a lent GPU).
int tile_sweep(const char* tuned_dir) {
  struct S {
    int64_t m, n, k;
    const char* what;
  };
  const S shapes[] = {{2048, 2048, 2048, "square"},         {4096, 4096, 4096, "square"},
                      {8192, 8192, 8192, "square"},         {256, 1024, 4096, "wide k"},
                      {64, 128, 3136, "MnistCnn fc1"},      {3200, 10000, 128, "LSTM LM head"},
                      {32, 512, 128, "LSTM gates per step"}};
  Table t{{"sgemm m x n x k", "tile", "native", "of cuBLAS", ""}, {}};
  std::vector<cuda::MeasuredGemm> winners;
  for (const S& s : shapes) {
    Tensor a = randn({s.m, s.k}, {.device = kGpu}), b = randn({s.k, s.n}, {.device = kGpu});
    const double flops = 2.0 * s.m * s.n * s.k;
    const std::string size = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    const double vendor_s = has_vendor(KernelFamily::Gemm)
                                ? time_with(KernelFamily::Gemm, KernelChoice::Vendor, [&] { (void)matmul(a, b); })
                                : 0;
    cuda::MeasuredGemm best{{s.m, s.n, s.k, cuda::kDefaultGemmTile}, 0, vendor_s > 0 ? flops / vendor_s / 1e12 : 0};
    for (cuda::GemmTile tile : cuda::kGemmTiles) {
      const std::string name(cuda::gemm_tile_name(tile));
      setenv("EMBER_GEMM_TILE", name.c_str(), 1);
      const double sec = time_with(KernelFamily::Gemm, KernelChoice::Native, [&] { (void)matmul(a, b); });
      const double tflops = flops / sec / 1e12;
      if (tflops > best.tflops) best.entry.tile = tile, best.tflops = tflops;
      t.rows.push_back({size + " (" + s.what + ")", name, fmt("%.3f ms ", sec * 1e3) + fmt("(%.1f TFLOP/s)", tflops),
                        vendor_s > 0 ? fmt("%.2fx", vendor_s / sec) : "n/a", ""});
    }
    unsetenv("EMBER_GEMM_TILE");
    std::printf("tile winner %s: %s (%.1f TFLOP/s; cuBLAS %.1f)\n", size.c_str(),
                std::string(cuda::gemm_tile_name(best.entry.tile)).c_str(), best.tflops, best.vendor_tflops);
    winners.push_back(best);
  }
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Auto);
  t.print();
  if (tuned_dir) {
#if EMBER_WITH_CUDA
    const cuda::DeviceInfo dev = cuda::device_info(0);
    const std::string path = std::string(tuned_dir) + "/sm" + std::to_string(dev.sm) + ".h";
    const std::string text = cuda::tuned_gemm_header(dev.sm, dev.name, utc_date(), winners);
    write_file_atomic(path, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
    std::printf("tuned table written: %s (%zu entries, %s)\n", path.c_str(), winners.size(), dev.name.c_str());
#endif
  }
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
            "usage: %s [--quick] [--tiles [--write-tuned DIR] | --ncu]\n\nNative CUDA kernels beside cuBLAS/cuDNN and "
            "training throughput on a GPU (n/a rows without one). --tiles: the SGEMM tile sweep (each tile of "
            "core/cuda/gemm_tuning.h beside cuBLAS); --write-tuned DIR: also write its winners as DIR/sm<NN>.h, "
            "the tuned table to commit as core/cuda/tuned/sm<NN>.h; --ncu: one native SGEMM and conv for Nsight "
            "Compute.\n"))
      return 0;
    bool tiles = false, ncu = false;
    const char* tuned_dir = nullptr;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0) {
        g_quick = true;
      } else if (std::strcmp(argv[i], "--tiles") == 0) {
        tiles = true;
      } else if (std::strcmp(argv[i], "--write-tuned") == 0) {
        if (i + 1 == argc) {
          std::fprintf(stderr, "gpu: --write-tuned needs the folder to write sm<NN>.h into\n");
          return 2;
        }
        tuned_dir = argv[++i];
      } else if (std::strcmp(argv[i], "--ncu") == 0) {
        ncu = true;
      } else {
        std::fprintf(stderr,
                     "gpu: unknown argument '%s' (usage: gpu [--quick] [--tiles [--write-tuned DIR] | --ncu])\n",
                     argv[i]);
        return 2;
      }
    }
    if (tuned_dir && !tiles) {
      std::fprintf(
          stderr,
          "gpu: --write-tuned goes with --tiles (usage: gpu [--quick] [--tiles [--write-tuned DIR] | --ncu])\n");
      return 2;
    }
    if ((tiles || ncu) && cuda_device_count() == 0) {
      std::printf("bench/gpu: skipped: no CUDA device\n");
      return 0;
    }
    if (tiles) return tile_sweep(tuned_dir);
    if (ncu) return ncu_once();
    Table kernels{{"kernel", "size", "native", "vendor (cuBLAS/cuDNN)", "vendor/native time"}, {}};
    Table training{{"training", "size", "throughput", "Ember launches/step", "host waits/step"}, {}};
    if (cuda_device_count() == 0) {
      std::printf("bench/gpu: skipped: no CUDA device (%s)\n",
                  EMBER_WITH_CUDA ? "built with CUDA" : "built without CUDA");
      for (const char* row : {"sgemm 1024..8192", "bf16 gemm 2048..8192", "fp16 gemm 2048..8192",
                              "conv fwd/bwd (MNIST CNN, ResNet 3x3)", "bf16 conv fwd/bwd (MNIST conv2, ResNet 3x3)",
                              "fp16 conv fwd/bwd (MNIST conv2, ResNet 3x3)", "lstm fwd/bwd"})
        kernels.rows.push_back({row, "", "n/a (no GPU)", "n/a (no GPU)", "n/a"});
      for (const char* what : {"MnistCnn train step", "DCGAN train step (D+G)"})
        for (std::optional<DType> low :
             {std::optional<DType>(), std::optional<DType>(DType::BFloat16), std::optional<DType>(DType::Float16)})
          training.rows.push_back({what + precision_suffix(low), "batch 64", "n/a (no GPU)", "n/a", "n/a"});
    } else {
      gemm_rows(kernels);
      lowp_gemm_rows(kernels, DType::BFloat16);
      lowp_gemm_rows(kernels, DType::Float16);
      conv_rows(kernels, DType::Float32);
      conv_rows(kernels, DType::BFloat16);
      conv_rows(kernels, DType::Float16);
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
