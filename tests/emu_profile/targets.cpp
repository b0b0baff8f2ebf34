// Issue 50's hardware targets as the emulator bounds them (docs/cuda/kernel-report.md, "Targets"):
// each target's call runs on the emulated device in dry-run mode (every launch checked and
// recorded, no thread run: the shapes are far too large to emulate), so the grids are exactly those
// the dispatch picks (tiles, split-K slices). With ptxas's resident blocks per SM each GEMM pass
// fills some share of an H100's SMs (sm_fill); at the FP32 peak times that share a pass can go no
// faster, so the target's FLOPs bound its rate from above: its ceiling. Against the vendor's rate
// the last lent GPU measured (an H200, 2026-12-04, e3d8b24: bench/RESULTS.md; an H100 SXM and an
// H200 have the same 132 SMs and FP32 peak, so one ceiling serves both), a ceiling below the
// goal predicts the goal unmet; one above it only leaves it open: the emulator has no clock, and
// issue limits, latency and caches are the GPU's to show.
#include <cstdio>
#include <ostream>

#include "core/cuda/emu/emu.h"
#include "core/cuda/emu/emu_device.h"
#include "core/ops.h"
#include "emu_profile/kernel_report.h"

namespace kernel_report {
namespace {

using ember::Tensor;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Tensor device_empty(ember::Device d, ember::Shape s) {
  return ember::empty(std::move(s), {.dtype = ember::DType::Float32, .device = d});
}

Target gemm_target(const std::string& name, int64_t m, int64_t n, int64_t k, double vendor_tflops) {
  Target t;
  t.name = "sgemm " + name;
  t.goal = ">= 0.9x cuBLAS";
  t.goal_ratio = 0.9;
  t.vendor_tflops = vendor_tflops;
  t.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  t.passes = {"sgemm_warptile"};
  t.make = [=](ember::Device d) {
    Tensor a = device_empty(d, {m, k}), b = device_empty(d, {k, n});
    return std::function<void()>([a, b] { ember::mm(a, b); });
  };
  return t;
}

// A 3x3 (or 5x5) convolution of n images c -> oc channels, h x w, forward alone or with both of
// its gradients (autograd: backward-data and backward-filter, each as many FLOPs as forward).
Target conv_target(const std::string& name, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t kk,
                   int64_t pad, bool backward, double vendor_tflops, double goal_ratio) {
  Target t;
  t.name = name + (backward ? " fwd+bwd" : " fwd");
  t.goal = ">= " + std::string(goal_ratio == 1.0 ? "1" : "0.8") + "x cuDNN";
  t.goal_ratio = goal_ratio;
  t.vendor_tflops = vendor_tflops;
  const int64_t oh = h + 2 * pad - kk + 1, ow = w + 2 * pad - kk + 1;
  const double pass = 2.0 * static_cast<double>(n * oc * c * kk * kk * oh * ow);
  t.passes = {"conv::Forward"};
  if (backward) t.passes.insert(t.passes.end(), {"conv::BackwardData", "conv::BackwardFilter"});
  t.flops = pass * static_cast<double>(t.passes.size());
  t.make = [=](ember::Device d) {
    Tensor x = device_empty(d, {n, c, h, w}), wt = device_empty(d, {oc, c, kk, kk});
    if (backward) {
      x.requires_grad_();
      wt.requires_grad_();
    }
    Tensor gy = device_empty(d, {n, oc, oh, ow});
    ember::Conv2dParams p;
    p.padding = {pad, pad};
    return std::function<void()>([x, wt, gy, p, backward] {
      Tensor y = ember::conv2d(x, wt, Tensor(), p);
      if (backward) y.backward(gy);
    });
  };
  return t;
}

}  // namespace

std::vector<Target> issue50_targets() {
  // The vendor's rates on the H200 (cuBLAS, cuDNN; TF32 off), 2026-12-04, e3d8b24; 0: not measured.
  std::vector<Target> v;
  v.push_back(gemm_target("2048^3", 2048, 2048, 2048, 48.4));
  v.push_back(gemm_target("4096^3", 4096, 4096, 4096, 50.0));
  v.push_back(gemm_target("8192^3", 8192, 8192, 8192, 51.1));
  // The examples' shapes (bench/gpu's tile sweep has them): MnistCnn's fc1, the LSTM LM's head over
  // T x B rows, one LSTM step's gates.
  v.push_back(gemm_target("MnistCnn fc1 64x128x3136", 64, 128, 3136, 0));
  v.push_back(gemm_target("LSTM LM head 3200x10000x128", 3200, 10000, 128, 0));
  v.push_back(gemm_target("LSTM step 32x512x128", 32, 512, 128, 0));
  v.push_back(conv_target("resnet 3x3 32x64x56x56 -> 64", 32, 64, 56, 56, 64, 3, 1, false, 41.9, 0.8));
  v.push_back(conv_target("resnet 3x3 32x64x56x56 -> 64", 32, 64, 56, 56, 64, 3, 1, true, 36.5, 0.8));
  v.push_back(conv_target("mnist conv1 64x1x28x28 -> 32", 64, 1, 28, 28, 32, 3, 0, false, 0.6, 1.0));
  v.push_back(conv_target("mnist conv2 64x32x13x13 -> 64", 64, 32, 13, 13, 64, 3, 0, false, 5.5, 1.0));
  v.push_back(conv_target("mnist conv2 64x32x13x13 -> 64", 64, 32, 13, 13, 64, 3, 0, true, 7.0, 1.0));
  return v;
}

Prediction predict(const Target& t, const PtxasTable& ptxas) {
  std::function<void()> run = t.make(ember::emu::device());
  ember::emu::Options o = ember::emu::options();
  o.dry_run = true;
  const ember::emu::ScopedOptions dry(o);
  profile::Session s;
  run();
  const std::vector<Row> rows = rows_of(t.name, s.take(), ptxas);
  Prediction p;
  p.target = &t;
  double seconds = 0;  // each pass's FLOPs at the peak times its fill
  const double per_pass = t.flops / static_cast<double>(t.passes.size());
  for (const std::string& pass : t.passes) {
    const Row* r = nullptr;
    for (const Row& x : rows)
      if (x.kernel.find(pass) != std::string::npos) r = &x;
    const double fill = r ? sm_fill(*r, r->occ90, kH100) : -1.0;
    p.passes.push_back({pass, r ? r->kernel : "(not launched)", r ? r->launch_blocks : std::vector<uint64_t>{}, fill});
    if (fill <= 0) return p;  // unknown: no ceiling
    seconds += per_pass / (kH100.fp32_flops_per_s * fill);
  }
  p.ceiling_flops_per_s = t.flops / seconds;
  return p;
}

void print_targets(std::ostream& os, const std::vector<Prediction>& v) {
  os << "\nIssue 50's targets as the emulator bounds them (dry run: each call's launches, no thread run; "
        "ceiling = FP32 peak x each pass's H100 fill; vendor: the H200's rate of 2026-12-04):\n\n"
     << "| target | goal | pass (kernel): blocks per launch, H100 fill | ceiling TFLOP/s (of peak) | vendor TFLOP/s | "
        "ceiling / vendor | prediction |\n|---|---|---|---|---|---|---|\n";
  for (const Prediction& p : v) {
    const Target& t = *p.target;
    std::string passes;
    for (const PassFill& f : p.passes) {
      std::string blocks;
      for (uint64_t b : f.launch_blocks) blocks += (blocks.empty() ? "" : "+") + std::to_string(b);
      const std::string kernel = f.kernel.substr(0, f.kernel.find('<'));
      passes += (passes.empty() ? "" : "; ") + f.pass + (kernel == f.pass ? "" : " (" + kernel + ")") + ": " +
                (blocks.empty() ? "-" : blocks) + ", " + (f.fill < 0 ? "n/a" : fixed(100 * f.fill, 1) + "%");
    }
    const bool known = p.ceiling_flops_per_s > 0;
    const double ratio = known && t.vendor_tflops > 0 ? p.ceiling_flops_per_s / 1e12 / t.vendor_tflops : -1;
    os << "| " << t.name << " | " << t.goal << " | " << passes << " | "
       << (known ? fixed(p.ceiling_flops_per_s / 1e12, 1) + " (" +
                       fixed(100 * p.ceiling_flops_per_s / kH100.fp32_flops_per_s, 1) + "%)"
                 : "n/a (no ptxas data)")
       << " | " << (t.vendor_tflops > 0 ? fixed(t.vendor_tflops, 1) : "not measured") << " | "
       << (ratio > 0 ? fixed(ratio, 2) : "-") << " | "
       << (ratio < 0              ? "needs a GPU"
           : ratio < t.goal_ratio ? "unmet: the grid cannot fill the GPU"
                                  : "open: needs a GPU")
       << " |\n";
  }
}

}  // namespace kernel_report
