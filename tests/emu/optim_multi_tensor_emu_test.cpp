// The multi-tensor Adam step and total gradient norm of the CUDA optimizers (layers/cuda/optim.cu)
// where the op table cannot go (tests/ops/op_rows_optim.cpp has every optimizer variant and dtype,
// many parameters of sizes around a chunk each with its own step count, and the norms): a tensor
// of more chunks than one launch's 320-block table, which continues in the next launch (2.6
// million elements, too many to run on every backend of the table; forward order only), and the
// multi-tensor Adam step being the single-tensor one's device code, bit for bit, in all three
// thread orders (two device kernels agreeing, which a comparison with the CPU reference cannot
// show).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "emu/emu_test_util.h"
#include "layers/optim/fused_kernels.h"

using namespace ember;
using namespace ember::optim;
using emu_test::device_copy;
using emu_test::expect_close;

namespace {

class OptimMultiTensor : public emu_test::EmulatedKernel {};

// Sizes: more tensors than one launch's 24 slots, sizes that are no multiple of the 8192-element
// chunk, empty ones, and (when `large`) a tensor of more chunks than one launch's block table.
std::vector<int64_t> multi_sizes(bool large) {
  std::vector<int64_t> sizes = {1, 0, 1027, 8192, 8193, 20000};
  for (int i = 0; i < 22; ++i) sizes.push_back(31 + 97 * i);
  if (large) sizes.push_back(320 * 8192 + 1000);
  return sizes;
}

// A parameter, its gradient and Adam's three state tensors (random, as after some steps).
std::vector<Tensor> adam_state(int64_t n, DType dt) {
  std::vector<Tensor> s = {randn({n}, {.dtype = dt}), randn({n}, {.dtype = dt})};
  for (int k = 0; k < 3; ++k) s.push_back(rand({n}, {.dtype = dt}) * 0.1);
  return s;
}
std::vector<Tensor> device_copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> d;
  for (const Tensor& t : ts) d.push_back(device_copy(t));
  return d;
}

AdamHyper variant_of(int variant) {
  AdamHyper h;
  h.lr = 1e-2;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.eps = 1e-8;
  h.weight_decay = variant == 0 ? 0.0 : 0.05;
  h.decoupled_weight_decay = variant == 2;
  h.amsgrad = variant == 1;
  return h;
}

// Two steps of every tensor through the multi-tensor kernel and through the single-tensor one,
// each tensor with its own step count (as after a parameter joined late), and on the CPU when
// `with_cpu`. Every result of the multi-tensor kernel must equal the single-tensor kernel's bits.
void check_multi(const std::vector<int64_t>& sizes, DType dt, int variant, bool with_cpu) {
  const AdamHyper h = variant_of(variant);
  std::vector<std::vector<Tensor>> cpu, single, multi;
  for (int64_t n : sizes) {
    cpu.push_back(adam_state(n, dt));
    single.push_back(device_copies(cpu.back()));
    multi.push_back(device_copies(cpu.back()));
  }
  auto vmax = [&](const std::vector<Tensor>& s) { return h.amsgrad ? s[4] : Tensor(); };
  for (int step = 1; step <= 2; ++step) {
    std::vector<AdamTensors> ts;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int own = step + static_cast<int>(i % 3);
      AdamHyper hi = h;
      hi.bias_correction1 = 1.0 - std::pow(h.beta1, own);
      hi.bias_correction2 = 1.0 - std::pow(h.beta2, own);
      if (with_cpu) adam_step_stub(Device::cpu())(cpu[i][0], cpu[i][1], cpu[i][2], cpu[i][3], vmax(cpu[i]), hi);
      const std::vector<Tensor>& o = single[i];
      emu::kernel(adam_step_stub)(o[0], o[1], o[2], o[3], vmax(o), hi);
      const std::vector<Tensor>& m = multi[i];
      ts.push_back({m[0], m[1], m[2], m[3], vmax(m), hi.bias_correction1, hi.bias_correction2});
    }
    emu::kernel(adam_multi_step_stub)(ts, h);
  }
  const double tol = dt == DType::Float32 ? 1e-4 : 1e-11;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string what = std::string(dtype_name(dt)) + " variant " + std::to_string(variant) + " tensor " +
                             std::to_string(i) + " of " + std::to_string(sizes[i]);
    for (size_t k = 0; k < multi[i].size(); ++k) {
      if (k == 1) continue;  // the gradient
      expect_close(multi[i][k], single[i][k], 0, 0, what + " vs the single-tensor kernel, tensor " + std::to_string(k));
      if (with_cpu) expect_close(multi[i][k], cpu[i][k], tol, tol, what + " vs the CPU, tensor " + std::to_string(k));
    }
  }
}

}  // namespace

TEST_P(OptimMultiTensor, AdamIsTheSingleTensorKernelBitForBit) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (int variant = 0; variant < 3; ++variant) check_multi(multi_sizes(false), dt, variant, true);
}

TEST(OptimMultiTensorLarge, AdamContinuesATensorInTheNextLaunch) {
  check_multi(multi_sizes(true), DType::Float32, 0, true);
}

TEST(OptimMultiTensorLarge, TotalGradNormContinuesATensorInTheNextLaunch) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Tensor> cpu, dev;
  int i = 0;
  for (int64_t n : multi_sizes(true)) {
    // Both dtypes in one list (the CUDA kernel takes float32 first, then float64).
    const DType dt = i++ % 2 ? DType::Float64 : DType::Float32;
    cpu.push_back(randn({n}, {.dtype = dt}));
    dev.push_back(device_copy(cpu.back()));
  }
  for (double p : {1.0, 2.0, 3.0, inf}) {
    double want = 0;
    for (const Tensor& t : cpu) {
      const double v = grad_norm_stub(Device::cpu())(t, p);
      want = std::isinf(p) ? std::max(want, v) : want + v;
    }
    EXPECT_NEAR(emu::kernel(grad_norm_total_stub)(dev, p), want, 1e-9 * std::abs(want)) << "p " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, OptimMultiTensor, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
