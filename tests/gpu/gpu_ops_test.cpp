// The GPU test label: every op of the table below runs on cuda:0 and on the CPU from the same
// random inputs, forward and backward, once with the native kernels and once with the vendor ones
// (EMBER_KERNELS=native / vendor), and the outputs and input gradients are compared. The table
// is keyed by op name, so a kernel that registers for an op is covered by its row without any
// change here; a new op needs one row. Without a GPU every test skips and the program prints
// "skipped: no CUDA device" (ctest reports it as skipped, tests/CMakeLists.txt).
#include <ember/config.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/copy.h"
#include "core/elementwise_kernels.h"
#include "core/gemm_kernels.h"
#include "core/generator.h"
#include "core/index_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"
#include "core/ops.h"
#include "core/reduce_kernels.h"
#include "core/rnn_kernels.h"
#include "core/stream.h"
#if EMBER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#if EMBER_GPU_TESTS_HAVE_LAYERS
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#endif

using namespace ember;

namespace {

bool have_gpu() {
  return cuda_device_count() > 0;
}

using Inputs = std::vector<Tensor>;
struct OpCase {
  std::string name;
  std::function<Inputs(Generator&)> inputs;  // CPU tensors; floating ones get gradients
  std::function<Tensor(const Inputs&)> f;
  double tol = 2e-4;  // relative to the reference's max magnitude
};

Tensor rn(Generator& g, Shape s) {
  return randn(std::move(s), {}, &g);
}
Tensor pos(Generator& g, Shape s) {  // strictly positive, for log/sqrt/div
  return add(abs(randn(std::move(s), {}, &g)), 0.5);
}

std::vector<OpCase> op_table() {
  std::vector<OpCase> t;
  auto unary = [&](const std::string& name, std::function<Tensor(const Tensor&)> f, bool positive = false) {
    t.push_back({name,
                 [positive](Generator& g) {
                   return Inputs{positive ? pos(g, {37, 53}) : rn(g, {37, 53})};
                 },
                 [f](const Inputs& x) { return f(x[0]); }});
  };
  auto binary = [&](const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    // Broadcasting [7, 1, 33] with [5, 33], odd sizes on purpose.
    t.push_back({name,
                 [](Generator& g) {
                   return Inputs{rn(g, {7, 1, 33}), pos(g, {5, 33})};
                 },
                 [f](const Inputs& x) { return f(x[0], x[1]); }});
  };
  binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); });
  binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary("div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  binary("pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a) + 0.1, b); });
  unary("neg", [](const Tensor& a) { return neg(a); });
  unary("abs", [](const Tensor& a) { return abs(a); });
  unary("exp", [](const Tensor& a) { return exp(a); });
  unary(
      "log", [](const Tensor& a) { return log(a); }, true);
  unary(
      "sqrt", [](const Tensor& a) { return sqrt(a); }, true);
  unary(
      "rsqrt", [](const Tensor& a) { return rsqrt(a); }, true);
  unary("relu", [](const Tensor& a) { return relu(a); });
  unary("leaky_relu", [](const Tensor& a) { return leaky_relu(a, 0.1); });
  unary("elu", [](const Tensor& a) { return elu(a); });
  unary("gelu", [](const Tensor& a) { return gelu(a); });
  unary("sigmoid", [](const Tensor& a) { return sigmoid(a); });
  unary("tanh", [](const Tensor& a) { return tanh(a); });
  unary("softplus", [](const Tensor& a) { return softplus(a); });
  unary("clamp", [](const Tensor& a) { return clamp(a, -0.5, 0.7); });
  unary("sum", [](const Tensor& a) { return sum(a); });
  unary("sum_dim0", [](const Tensor& a) { return sum(a, {0}); });
  unary("mean_dim1", [](const Tensor& a) { return mean(a, {1}, true); });
  unary("amax_dim1", [](const Tensor& a) { return amax(a, {1}); });
  unary("var", [](const Tensor& a) { return var(a, {1}); });
  unary("logsumexp", [](const Tensor& a) { return logsumexp(a, {1}); });
  unary("norm", [](const Tensor& a) { return norm(a); });
  unary("softmax", [](const Tensor& a) { return softmax(a, 1); });
  unary("log_softmax", [](const Tensor& a) { return log_softmax(a, 1); });
  unary("transpose_contiguous", [](const Tensor& a) { return a.t().contiguous(); });
  unary("layer_norm", [](const Tensor& a) { return layer_norm(a, {53}); });

  t.push_back({"matmul",
               [](Generator& g) {
                 return Inputs{rn(g, {67, 45}), rn(g, {45, 71})};
               },
               [](const Inputs& x) { return matmul(x[0], x[1]); }});
  t.push_back({"matmul_transposed",
               [](Generator& g) {
                 return Inputs{rn(g, {45, 67}), rn(g, {71, 45})};
               },
               [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); }});
  t.push_back({"bmm",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 17, 29}), rn(g, {3, 29, 13})};
               },
               [](const Inputs& x) { return bmm(x[0], x[1]); }});
  t.push_back({"addmm",
               [](Generator& g) {
                 return Inputs{rn(g, {31}), rn(g, {19, 23}), rn(g, {23, 31})};
               },
               [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }});
  t.push_back({"conv2d",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 5, 13, 11}), rn(g, {7, 5, 3, 3}), rn(g, {7})};
               },
               [](const Inputs& x) {
                 return conv2d(x[0], x[1], x[2], {.stride = {2, 1}, .padding = {1, 1}});
               }});
  t.push_back({"conv2d_mnist",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 1, 28, 28}), rn(g, {32, 1, 3, 3})};
               },
               [](const Inputs& x) { return conv2d(x[0], x[1]); }});
  t.push_back({"conv_transpose2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 6, 7, 9}), rn(g, {6, 4, 3, 3}), rn(g, {4})};
               },
               [](const Inputs& x) {
                 return conv_transpose2d(x[0], x[1], x[2], {.stride = {2, 2}, .padding = {1, 1}});
               }});
  t.push_back({"max_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) { return max_pool2d(x[0], 2); }});
  t.push_back({"avg_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) {
                 return avg_pool2d(x[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
               }});
  t.push_back({"adaptive_avg_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) {
                 return adaptive_avg_pool2d(x[0], {5, 4});
               }});
  t.push_back({"batch_norm_train",
               [](Generator& g) {
                 return Inputs{rn(g, {6, 5, 7, 3}), pos(g, {5}), rn(g, {5})};
               },
               [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }});
  t.push_back({"cross_entropy",
               [](Generator& g) {
                 Tensor target = randint(0, 11, {29}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {29, 11}), target};
               },
               [](const Inputs& x) { return cross_entropy(x[0], x[1]); }});
  t.push_back({"embedding",
               [](Generator& g) {
                 Tensor idx = randint(0, 17, {5, 9}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {17, 8}), idx};
               },
               [](const Inputs& x) { return embedding(x[0], x[1]); }});
  t.push_back({"gather",
               [](Generator& g) {
                 Tensor idx = randint(0, 13, {7, 4}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {7, 13}), idx};
               },
               [](const Inputs& x) { return gather(x[0], 1, x[1]); }});
  t.push_back({"cat",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 5}), rn(g, {4, 5})};
               },
               [](const Inputs& x) {
                 return cat({x[0], x[1]}, 0);
               }});
  // Comparisons, logic and selection (core/cuda/compare.cu). Small integers in halves make ties,
  // and NaN, infinities and signed zeros are planted, so that a bool disagreeing anywhere fails
  // (tolerance 0). Selection rows take finite values: rel_err cannot see a NaN or an infinity
  // (GpuCompare below checks those bit for bit).
  auto tricky = [](Generator& g, Shape s) {
    Tensor x = mul(randint(-4, 5, s, {.dtype = DType::Float32}, &g), 0.5);
    x = masked_fill(x, gt(rn(g, s), 1.5), NAN);
    x = masked_fill(x, lt(rn(g, s), -1.8), -INFINITY);
    return masked_fill(x, lt(rn(g, s), -1.6), -0.0);
  };
  auto compare = [&](const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    t.push_back({name,
                 [tricky](Generator& g) {
                   return Inputs{tricky(g, {7, 1, 33}), tricky(g, {5, 33})};
                 },
                 [f](const Inputs& x) { return f(x[0], x[1]); }, 0.0});
  };
  compare("eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); });
  compare("ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); });
  compare("lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); });
  compare("le", [](const Tensor& a, const Tensor& b) { return le(a, b); });
  compare("gt_scalar", [](const Tensor& a, const Tensor&) { return gt(a, 0.0); });
  compare("ge_float64", [](const Tensor& a, const Tensor& b) { return ge(a.to(DType::Float64), b); });
  compare("eq_float16",
          [](const Tensor& a, const Tensor& b) { return eq(a.to(DType::Float16), b.to(DType::Float16)); });
  compare("lt_bfloat16",
          [](const Tensor& a, const Tensor& b) { return lt(a.to(DType::BFloat16), b.to(DType::BFloat16)); });
  t.push_back({"eq_int64",
               [](Generator& g) {
                 return Inputs{randint(-2, 3, {7, 1, 33}, {.dtype = DType::Int64}, &g),
                               randint(-2, 3, {5, 33}, {.dtype = DType::Int64}, &g)};
               },
               [](const Inputs& x) { return eq(x[0], x[1]); }, 0.0});
  // Bool masks (int64 inputs, so they get no gradient).
  auto masks = [](Generator& g) {
    return Inputs{randint(0, 2, {7, 1, 33}, {.dtype = DType::Int64}, &g),
                  randint(0, 2, {5, 33}, {.dtype = DType::Int64}, &g)};
  };
  t.push_back({"logical_and", masks, [](const Inputs& x) { return logical_and(x[0], x[1]); }, 0.0});
  t.push_back({"logical_or", masks, [](const Inputs& x) { return logical_or(x[0], x[1]); }, 0.0});
  t.push_back({"logical_not", masks, [](const Inputs& x) { return logical_not(x[1]); }, 0.0});
  t.push_back(
      {"where",
       [](Generator& g) {
         return Inputs{randint(0, 2, {7, 1, 33}, {.dtype = DType::Int64}, &g), rn(g, {7, 5, 33}), rn(g, {5, 33})};
       },
       // Selection is exact; the gradient of the broadcast side is a sum (another order).
       [](const Inputs& x) { return where(ne(x[0], 0), x[1], x[2]); }, 1e-6});
  t.push_back({"where_scalar_side",
               [](Generator& g) {
                 return Inputs{rn(g, {37, 53})};
               },
               [](const Inputs& x) { return where(gt(x[0], 0.2), x[0], zeros({}, x[0].options())); }, 0.0});
  t.push_back({"masked_fill",
               [](Generator& g) {
                 return Inputs{rn(g, {7, 5, 33}), randint(0, 2, {5, 1}, {.dtype = DType::Int64}, &g)};
               },
               [](const Inputs& x) { return masked_fill(x[0], ne(x[1], 0), -2.5); }, 0.0});
  t.push_back({"masked_fill_inplace",
               [](Generator& g) {
                 return Inputs{rn(g, {37, 53}), randint(0, 2, {53}, {.dtype = DType::Int64}, &g)};
               },
               [](const Inputs& x) {
                 Tensor y = add(x[0], 0.0);
                 masked_fill_(y, ne(x[1], 0), 3.0);
                 return y;
               },
               0.0});

  auto rnn_case = [&](const std::string& name, RnnMode mode, int64_t gates) {
    t.push_back(
        {name,
         [gates](Generator& g) {
           const int64_t T = 6, B = 3, I = 5, H = 7;
           return Inputs{rn(g, {T, B, I}),   rn(g, {gates * H, I}), rn(g, {gates * H, H}),
                         rn(g, {gates * H}), rn(g, {gates * H}),    rn(g, {B, H})};
         },
         [mode](const Inputs& x) {
           return rnn_layer(mode, x[0], x[1], x[2], x[3], x[4], x[5], mode == RnnMode::Lstm ? x[5] : Tensor()).output;
         },
         5e-4});
  };
  rnn_case("lstm", RnnMode::Lstm, 4);
  rnn_case("gru", RnnMode::Gru, 3);
  rnn_case("rnn_tanh", RnnMode::RnnTanh, 1);
  // Variable lengths: the lengths reach the device through pinned memory and the copy stream.
  t.push_back({"lstm_padded",
               [](Generator& g) {
                 const int64_t T = 6, B = 3, I = 5, H = 7;
                 return Inputs{rn(g, {T, B, I}), rn(g, {4 * H, I}), rn(g, {4 * H, H}),
                               rn(g, {4 * H}),   rn(g, {4 * H}),    rn(g, {B, H})};
               },
               [](const Inputs& x) {
                 return rnn_layer(RnnMode::Lstm, x[0], x[1], x[2], x[3], x[4], x[5], x[5], {6, 4, 1}).h_n;
               },
               5e-4});
  return t;
}

double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// Max |a - b| relative to b's magnitude (absolute below magnitude 1).
double rel_err(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return INFINITY;
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::abs(x[i] - y[i]));
  return e / std::max(1.0, max_abs(b));
}

struct Param {
  OpCase op;
  KernelChoice choice;
};

class GpuOp : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
    set_kernel_choices(kernel_choice_name(GetParam().choice));
  }
  void TearDown() override { set_kernel_choices("auto"); }
};

TEST_P(GpuOp, MatchesCpuForwardAndBackward) {
  const OpCase& op = GetParam().op;
  Generator gen(1234);
  const Inputs base = op.inputs(gen);
  Inputs cpu_in, gpu_in;
  for (const Tensor& x : base) {
    Tensor c = x.clone().detach(), d = x.to(Device::cuda(0)).detach();
    if (is_floating(x.dtype())) {
      c.requires_grad_(true);
      d.requires_grad_(true);
    }
    cpu_in.push_back(c);
    gpu_in.push_back(d);
  }
  const Tensor out_c = op.f(cpu_in);
  const Tensor out_g = op.f(gpu_in);
  ASSERT_EQ(out_g.device(), Device::cuda(0)) << op.name << " left the GPU";
  ASSERT_EQ(out_g.shape(), out_c.shape()) << op.name;
  EXPECT_LE(rel_err(out_g.cpu(), out_c), op.tol) << op.name << " forward";

  if (!out_c.requires_grad()) return;
  Tensor w = randn(out_c.shape(), {}, &gen);  // a random upstream gradient
  sum(mul(out_c, w)).backward();
  sum(mul(out_g, w.to(Device::cuda(0)))).backward();
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    ASSERT_TRUE(gpu_in[i].grad().defined()) << op.name << " input " << i << " got no gradient on the GPU";
    EXPECT_LE(rel_err(gpu_in[i].grad().cpu(), cpu_in[i].grad()), op.tol * 5) << op.name << " gradient of input " << i;
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const OpCase& op : op_table())
    for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor}) p.push_back({op, c});
  return p;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GpuOp, ::testing::ValuesIn(params()), [](const auto& info) {
  return info.param.op.name + "_" + kernel_choice_name(info.param.choice);
});

TEST(GpuRuntime, RoundTripsEveryDtypeThroughTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool,
                   DType::Float16, DType::BFloat16}) {
    Tensor a = arange(0, 60, 1, {.dtype = DType::Float32}).reshape({3, 4, 5}).to(dt);
    Tensor back = a.to(Device::cuda(0)).to(Device::cpu());
    EXPECT_EQ(back.to_vector<double>(), a.to_vector<double>()) << dt;
    // Strided views both ways, and a dtype change on the way.
    Tensor v = a.to(Device::cuda(0)).transpose(0, 2).to(Device::cpu(), DType::Float64);
    EXPECT_EQ(v.to_vector<double>(), a.transpose(0, 2).to(DType::Float64).to_vector<double>()) << dt;
  }
}

// A dtype change on the device (cast.cu) for every pair, float16/bfloat16 included, from a
// strided view: bit for bit what the CPU's conversion gives.
TEST(GpuRuntime, CastsEveryDtypePairOnTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                  DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  Tensor base = (randn({3, 4, 5}) * 40.0).to(DType::Float64);
  for (DType from : all) {
    Tensor a = base.to(from);
    Tensor dev = a.to(Device::cuda(0)).transpose(0, 2);
    for (DType to : all) {
      Tensor got = dev.to(to).to(Device::cpu());
      Tensor want = a.transpose(0, 2).to(to);
      EXPECT_EQ(got.to(DType::Float64).to_vector<double>(), want.to(DType::Float64).to_vector<double>())
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

TEST(GpuRuntime, AllocatorCachesAcrossTrainingLikeSteps) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Allocator* a = get_allocator(Device::cuda(0));
  for (int i = 0; i < 3; ++i) Tensor x = empty({1024, 1024}, {.device = Device::cuda(0)});
  const int64_t os = a->stats().os_allocations;
  for (int i = 0; i < 20; ++i) Tensor x = empty({1024, 1024}, {.device = Device::cuda(0)});
  EXPECT_EQ(a->stats().os_allocations, os);
}

TEST(GpuRuntime, OutOfMemoryIsAnErrorNamingTheSizes) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  try {
    Tensor huge = empty({int64_t{1} << 40}, {.device = Device::cuda(0)});  // 4 TiB
    FAIL() << "allocated 4 TiB";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0: out of memory allocating 4398046511104 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes in use"), std::string::npos) << msg;
  }
}

// Comparisons, where and masked_fill on NaN of both signs, infinities, signed zeros and
// subnormals, in every dtype, bit for bit against the CPU (a GPU that flushed subnormals or
// canonicalised NaN would differ here), and allclose on both devices.
TEST(GpuCompare, SpecialValuesCompareAndSelectBitForBitLikeTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const std::vector<double> pool = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -1e-40, 1e-310, 3e-6, 1.0, -2.5};
  const int64_t n = static_cast<int64_t>(pool.size());
  // Every pair of pool values: a[i, j] = pool[i], b[i, j] = pool[j].
  const Tensor a64 = from_vector(pool, {n, 1}).expand({n, n}).contiguous();
  const Tensor b64 = from_vector(pool, {1, n}).expand({n, n}).contiguous();
  const Tensor cond = ne(randint(0, 2, {n, n}), 0);
  auto same_bits = [](const Tensor& gpu, const Tensor& cpu) {
    const Tensor g = gpu.cpu().contiguous(), c = cpu.contiguous();
    return g.dtype() == c.dtype() && g.shape() == c.shape() &&
           std::memcmp(g.raw_data(), c.raw_data(), static_cast<size_t>(c.numel()) * c.itemsize()) == 0;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    const Tensor a = a64.to(dt), b = b64.to(dt);
    const Tensor ag = a.to(Device::cuda(0)), bg = b.to(Device::cuda(0)), cg = cond.to(Device::cuda(0));
    EXPECT_TRUE(same_bits(eq(ag, bg), eq(a, b))) << dtype_name(dt) << " eq";
    EXPECT_TRUE(same_bits(ne(ag, bg), ne(a, b))) << dtype_name(dt) << " ne";
    EXPECT_TRUE(same_bits(lt(ag, bg), lt(a, b))) << dtype_name(dt) << " lt";
    EXPECT_TRUE(same_bits(ge(ag, bg), ge(a, b))) << dtype_name(dt) << " ge";
    EXPECT_TRUE(same_bits(where(cg, ag, bg), where(cond, a, b))) << dtype_name(dt) << " where";
    EXPECT_TRUE(same_bits(masked_fill(ag, cg, -NAN), masked_fill(a, cond, -NAN))) << dtype_name(dt) << " masked_fill";
    Tensor ac = a.clone(), acg = ag.clone();
    masked_fill_(ac, cond, -0.0);
    masked_fill_(acg, cg, -0.0);
    EXPECT_TRUE(same_bits(acg, ac)) << dtype_name(dt) << " masked_fill_";
  }
  for (double atol : {0.0, 1e-8, 3.0}) {
    const Tensor ag = a64.to(Device::cuda(0)), bg = b64.to(Device::cuda(0));
    EXPECT_EQ(allclose(ag, ag, 1e-5, atol), allclose(a64, a64, 1e-5, atol)) << atol;  // false: NaN
    EXPECT_EQ(allclose(ag, bg, 1e-5, atol), allclose(a64, b64, 1e-5, atol)) << atol;
  }
  const Tensor x = randn({100}), y = add(x, 1e-7);
  EXPECT_TRUE(allclose(x.to(Device::cuda(0)), y.to(Device::cuda(0))));
  EXPECT_FALSE(allclose(x.to(Device::cuda(0)), add(y, 1e-2).to(Device::cuda(0))));
}

// Every kernel stub of core has a CUDA kernel (the op table tests them; this names the missing).
TEST(GpuRuntime, EveryKernelStubHasACudaKernel) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  std::vector<std::string> missing;
#define EMBER_CHECK_STUB(s) \
  if (!s.has(DeviceType::CUDA)) missing.push_back(#s)
  EMBER_CHECK_STUB(copy_stub);
  EMBER_CHECK_STUB(fill_stub);
  EMBER_CHECK_STUB(gemm_stub);
  EMBER_CHECK_STUB(gemm_batched_stub);
  EMBER_CHECK_STUB(dot_stub);
  EMBER_CHECK_STUB(conv2d_forward_stub);
  EMBER_CHECK_STUB(conv2d_backward_input_stub);
  EMBER_CHECK_STUB(conv2d_backward_weight_stub);
  EMBER_CHECK_STUB(max_pool2d_forward_stub);
  EMBER_CHECK_STUB(max_pool2d_backward_stub);
  EMBER_CHECK_STUB(avg_pool2d_forward_stub);
  EMBER_CHECK_STUB(avg_pool2d_backward_stub);
  EMBER_CHECK_STUB(adaptive_avg_pool2d_forward_stub);
  EMBER_CHECK_STUB(adaptive_avg_pool2d_backward_stub);
  EMBER_CHECK_STUB(batch_norm_forward_stub);
  EMBER_CHECK_STUB(batch_norm_backward_stub);
  EMBER_CHECK_STUB(layer_norm_forward_stub);
  EMBER_CHECK_STUB(layer_norm_backward_stub);
  EMBER_CHECK_STUB(dropout_apply_stub);
  EMBER_CHECK_STUB(cross_entropy_forward_stub);
  EMBER_CHECK_STUB(cross_entropy_backward_stub);
  EMBER_CHECK_STUB(rnn_forward_stub);
  EMBER_CHECK_STUB(rnn_backward_stub);
  EMBER_CHECK_STUB(compare_stub);
  EMBER_CHECK_STUB(logical_stub);
  EMBER_CHECK_STUB(where_stub);
  EMBER_CHECK_STUB(isclose_stub);
  EMBER_CHECK_STUB(masked_fill_stub);
#undef EMBER_CHECK_STUB
  std::string list;
  for (const auto& m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << "stubs without a CUDA kernel:" << list;
}

// Each family with a vendor implementation also has Ember's own kernel; otherwise the "native"
// half of the op table silently ran the vendor path.
TEST(GpuRuntime, EveryFamilyHasANativeKernel) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (KernelFamily f :
       {KernelFamily::Gemm, KernelFamily::Conv, KernelFamily::Pool, KernelFamily::BatchNorm, KernelFamily::Rnn})
    EXPECT_TRUE(has_native(f) || !has_vendor(f)) << kernel_family_name(f) << ": only the vendor kernel is registered";
}

// ---------------------------------------------------------------- index ops (cuda-gather)
// gather, scatter / scatter_add (both of the CUDA scatter's paths: short fibers, and few long
// fibers with repeated indices), one_hot and tril/triu (core/cuda/gather_scatter.cu,
// one_hot_trilu.cu), forward and backward; these ops have no vendor implementation, so they run
// once. Their index checks run index_range on the device (core/cuda/index_range.cu).
std::vector<OpCase> index_op_table() {
  std::vector<OpCase> t;
  t.push_back({"gather_dim0_strided",
               [](Generator& g) {
                 Tensor idx = randint(0, 9, {13, 5}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {7, 9}), idx};
               },
               [](const Inputs& x) { return gather(x[0].t(), 0, x[1]); }});
  t.push_back({"scatter_add_short_fibers",
               [](Generator& g) {
                 Tensor idx = randint(0, 11, {6, 3}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {6, 11}), idx, rn(g, {7, 4})};
               },
               [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }});
  t.push_back({"scatter_add_long_fibers",
               [](Generator& g) {
                 Tensor idx = randint(0, 23, {2, 700}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {3, 23}), idx, rn(g, {2, 700})};
               },
               [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }});
  t.push_back({"scatter_repeated",
               [](Generator& g) {
                 Tensor idx = randint(0, 19, {300}, {.dtype = DType::Int64}, &g);
                 return Inputs{rn(g, {19}), idx, rn(g, {300})};
               },
               [](const Inputs& x) { return scatter(x[0], 0, x[1], x[2]); }});
  t.push_back({"one_hot",
               [](Generator& g) {
                 return Inputs{randint(0, 13, {5, 41}, {.dtype = DType::Int64}, &g)};
               },
               [](const Inputs& x) { return one_hot(x[0], 13); }});
  t.push_back({"tril",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 9, 7})};
               },
               [](const Inputs& x) { return tril(x[0].transpose(1, 2), -1); }});
  t.push_back({"triu",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 9, 7})};
               },
               [](const Inputs& x) { return triu(x[0], 2); }});
  return t;
}

std::vector<Param> index_params() {
  std::vector<Param> p;
  for (const OpCase& op : index_op_table()) p.push_back({op, KernelChoice::Native});
  return p;
}

INSTANTIATE_TEST_SUITE_P(IndexOps, GpuOp, ::testing::ValuesIn(index_params()),
                         [](const auto& info) { return info.param.op.name; });

TEST(GpuIndex, IndexRangeMatchesTheCpuAndBadIndicesAreErrors) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  for (int64_t n : {1, 5000, 3000001}) {
    Tensor idx = randint(-(int64_t{1} << 40), int64_t{1} << 40, {n}, {.dtype = DType::Int64});
    int64_t lo = 0, hi = 0, want_lo = 0, want_hi = 0;
    index_range_stub(Device::cpu())(idx, &want_lo, &want_hi);
    index_range_stub(Device::cuda(0))(idx.to(Device::cuda(0)), &lo, &hi);
    EXPECT_EQ(lo, want_lo) << n;
    EXPECT_EQ(hi, want_hi) << n;
  }
  Tensor a = randn({4, 5}).to(Device::cuda(0));
  Tensor bad = from_vector<int64_t>({0, 5, 1, 2}, {4, 1}).to(Device::cuda(0));
  try {
    gather(a, 1, bad);
    FAIL() << "gather accepted index 5 for a dim of size 5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 5 is out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(one_hot(from_vector<int64_t>({1, -2}, {2}).to(Device::cuda(0)), 4), Error);
}

TEST(GpuIndex, EveryIndexStubHasACudaKernel) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  EXPECT_TRUE(index_range_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(gather_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(scatter_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(one_hot_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(trilu_stub.has(DeviceType::CUDA));
}

// ------------------------------------------------------------------ sort, topk, reduction backwards
// core/cuda/sort.cu and core/cuda/reduce_grad.cu: the same comparison as the op table, for sort
// and topk (their gradient goes through scatter) and for the backward of the max/min, norm,
// logsumexp, prod and var/std reductions; then sort/topk bit for bit on ties and NaN.
Tensor tied(Generator& g, Shape s) {  // integer-valued floats: many exact ties
  return randint(-3, 4, std::move(s), {.dtype = DType::Float32}, &g);
}
Tensor near_one(Generator& g, Shape s) {  // long products stay finite
  return add(mul(rand(std::move(s), {}, &g), 0.2), 0.9);
}

std::vector<OpCase> sort_and_reduce_grad_table() {
  std::vector<OpCase> t;
  using Make = std::function<Tensor(Generator&)>;
  auto add_case = [&](const std::string& name, Make make, std::function<Tensor(const Tensor&)> f) {
    t.push_back({name, [make](Generator& g) { return Inputs{make(g)}; }, [f](const Inputs& x) { return f(x[0]); }});
  };
  const Make plain = [](Generator& g) { return rn(g, {37, 53}); };
  const Make ties = [](Generator& g) { return tied(g, {37, 53}); };
  add_case("sort_dim1", plain, [](const Tensor& a) { return sort(a, 1).first; });
  add_case("sort_dim0_descending", plain, [](const Tensor& a) { return sort(a, 0, true).first; });
  add_case("sort_indices_ties", ties, [](const Tensor& a) { return sort(a, 1).second.to(DType::Float32); });
  add_case("topk_dim1", plain, [](const Tensor& a) { return topk(a, 5, 1).first; });
  add_case("topk_smallest_dim0", plain, [](const Tensor& a) { return topk(a, 3, 0, false).first; });
  add_case(
      "sort_long_rows",
      [](Generator& g) {
        return rn(g, {2, 9000});
      },
      [](const Tensor& a) { return sort(a, 1).first; });
  add_case(
      "topk_long_rows",
      [](Generator& g) {
        return rn(g, {3, 20000});
      },
      [](const Tensor& a) { return topk(a, 100, 1).first; });
  add_case("amax_ties", ties, [](const Tensor& a) { return amax(a, {1}); });
  add_case("amin_all_ties", ties, [](const Tensor& a) { return amin(a); });
  add_case("max_dim1", plain, [](const Tensor& a) { return max(a, 1).first; });
  add_case("min_dim0", plain, [](const Tensor& a) { return min(a, 0, true).first; });
  add_case("norm_p1_dim1", plain, [](const Tensor& a) { return norm(a, 1.0, {1}); });
  add_case("norm_p3_dim0", plain, [](const Tensor& a) { return norm(a, 3.0, {0}); });
  add_case("norm_inf_ties", ties, [](const Tensor& a) { return norm(a, INFINITY, {1}); });
  add_case("logsumexp_dim0", plain, [](const Tensor& a) { return logsumexp(a, {0}); });
  add_case(
      "prod_dim0",
      [](Generator& g) {
        return near_one(g, {37, 53});
      },
      [](const Tensor& a) { return prod(a, 0); });
  add_case(
      "prod_long_rows_zeros",
      [](Generator& g) {
        Tensor x = near_one(g, {5, 300});
        return masked_fill(x, lt(rand({5, 300}, {}, &g), 0.004), 0.0);
      },
      [](const Tensor& a) { return prod(a, 1); });
  add_case("var_dim0", plain, [](const Tensor& a) { return var(a, {0}); });
  add_case("std_dim1", plain, [](const Tensor& a) { return ember::std(a, {1}); });
  return t;
}

INSTANTIATE_TEST_SUITE_P(SortAndReduceGrad, GpuOp, ::testing::ValuesIn([] {
                           std::vector<Param> p;
                           for (const OpCase& op : sort_and_reduce_grad_table())
                             p.push_back({op, KernelChoice::Native});
                           return p;
                         }()),
                         [](const auto& info) { return info.param.op.name; });

TEST(GpuSort, MatchesTheCpuBitForBitWithTiesNanAndEveryDtype) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(99);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::UInt8, DType::Bool}) {
    for (const Shape& s : {Shape{5, 37, 3}, Shape{2, 9000}, Shape{9000, 3}}) {
      std::vector<double> v = randint(0, 5, s, {.dtype = DType::Float64}, &gen).to_vector<double>();
      if (is_floating(dt))
        for (size_t i = 0; i < v.size(); i += 7) v[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0 : -INFINITY;
      if (dt == DType::Bool)
        for (double& e : v) e = e > 2;
      const Tensor a = from_vector<double>(v, s).to(dt);
      const Tensor d = a.to(Device::cuda(0));
      for (int64_t dim = 0; dim < a.dim(); ++dim)
        for (bool largest : {false, true})
          for (int64_t k : {a.size(dim), int64_t{1}, a.size(dim) / 2 + 1}) {
            const auto want = topk(a, k, dim, largest);
            const auto got = topk(d, k, dim, largest);
            const std::string what = std::string(dtype_name(dt)) + " " + shape_str(s) + " dim " + std::to_string(dim) +
                                     " k " + std::to_string(k) + (largest ? " largest" : "");
            const Tensor gv = got.first.cpu();
            ASSERT_EQ(gv.shape(), want.first.shape()) << what;
            const auto* gb = static_cast<const unsigned char*>(gv.raw_data());
            const auto* wb = static_cast<const unsigned char*>(want.first.raw_data());
            EXPECT_TRUE(std::equal(gb, gb + gv.numel() * gv.itemsize(), wb)) << what << ": value bits differ";
            EXPECT_EQ(got.second.cpu().to_vector<int64_t>(), want.second.to_vector<int64_t>()) << what << ": indices";
          }
    }
  }
}

TEST(GpuSort, SortAndReductionBackwardStubsHaveCudaKernels) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  EXPECT_TRUE(sort_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(reduce_grad_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(index_grad_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(prod_grad_stub.has(DeviceType::CUDA));
}

// ------------------------------------------------------------------ the defects of issue 26
// Checks that only a GPU can make: sizes no CI machine can hold, streams and graphs, cuBLAS.

// Pooling over a plane of 6 x 2^29 = 3 * 2^30 elements: offsets past 2^31 inside one plane,
// where the kernels' former int32 products (ih * W + iw, OH * OW) wrapped. About 35 GB of device
// memory; single elements are read back, so the CPU never holds the plane.
TEST(GpuLargePlanes, PoolingIndexesPlanesOfMoreThanTwoToThe31Elements) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const int64_t H = 6, W = int64_t{1} << 29;
  const Device g = Device::cuda(0);
  Tensor x = zeros({1, 1, H, W}, {.device = g});
  auto at = [](const Tensor& t, int64_t r, int64_t c) { return t.select(0, 0).select(0, 0).select(0, r).select(0, c); };
  at(x, 5, W - 1).fill_(5.0);  // flat offset 6W - 1, about 3.2e9
  at(x, 4, 1000).fill_(7.0);   // 4W + 1000 = 2^31 + 1000
  x.requires_grad_(true);
  auto [y, idx] = max_pool2d_with_indices(x, {.kernel = {2, 2}});
  EXPECT_EQ(at(y, 2, W / 2 - 1).item<float>(), 5.0f);
  EXPECT_EQ(at(idx, 2, W / 2 - 1).item<int64_t>(), 6 * W - 1);
  EXPECT_EQ(at(y, 2, 500).item<float>(), 7.0f);
  EXPECT_EQ(at(idx, 2, 500).item<int64_t>(), 4 * W + 1000);
  EXPECT_EQ(at(idx, 2, 7).item<int64_t>(), 4 * W + 14);  // an all-zero window: its first element
  sum(y).backward();
  const Tensor gx = x.grad();
  EXPECT_EQ(at(gx, 5, W - 1).item<float>(), 1.0f);
  EXPECT_EQ(at(gx, 4, W - 2).item<float>(), 0.0f);  // the first element of the marker's window
  EXPECT_EQ(at(gx, 4, 14).item<float>(), 1.0f);     // the first element of a zero window
  y = Tensor(), idx = Tensor();
  NoGradGuard ng;
  for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor}) {
    set_kernel_choices(kernel_choice_name(c));
    const Tensor a = avg_pool2d(x.detach(), {.kernel = {2, 2}});
    EXPECT_EQ(at(a, 2, W / 2 - 1).item<float>(), 1.25f) << kernel_choice_name(c);
    EXPECT_EQ(at(a, 2, 500).item<float>(), 1.75f) << kernel_choice_name(c);
    EXPECT_EQ(at(a, 2, 9).item<float>(), 0.0f) << kernel_choice_name(c);
  }
  set_kernel_choices("auto");
}

// A GEMM with more than 65535 row tiles of 128 (the former grid-y limit): native and vendor
// against the CPU.
TEST(GpuLargeShapes, GemmWithMoreThan65535RowTilesRunsNativeAndVendor) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(7);
  const int64_t m = 65535 * 128 + 7;
  const Tensor a = randn({m, 4}, {}, &gen), b = randn({4, 3}, {}, &gen);
  const Tensor want = matmul(a, b);
  for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor, KernelChoice::Auto}) {
    set_kernel_choices(kernel_choice_name(c));
    const Tensor got = matmul(a.to(Device::cuda(0)), b.to(Device::cuda(0))).cpu();
    EXPECT_LE(rel_err(got, want), 1e-5) << kernel_choice_name(c);
  }
  set_kernel_choices("auto");
}

// Full reductions and dots over long vectors take the two-stage kernels (many blocks, then the
// partials in order): against the CPU, and the same bits twice (deterministic).
TEST(GpuLargeShapes, FullReductionsAndDotsAreMultiBlockAndDeterministic) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(11);
  const Tensor x = randn({30'000'001}, {}, &gen), y = randn({30'000'001}, {}, &gen);
  const Tensor xd = x.to(Device::cuda(0)), yd = y.to(Device::cuda(0));
  EXPECT_LE(rel_err(sum(xd).cpu(), sum(x)), 1e-6);
  EXPECT_LE(rel_err(amax(xd).cpu(), amax(x)), 0.0);
  EXPECT_LE(rel_err(dot(xd, yd).cpu(), dot(x, y)), 1e-6);
  EXPECT_EQ(sum(xd).item<float>(), sum(xd).item<float>());
  EXPECT_EQ(dot(xd, yd).item<float>(), dot(xd, yd).item<float>());
}

// cross_entropy no longer copies its target check back in the forward: a bad target is reported
// at the next synchronisation (here the loss's item()), with the value and the class count.
TEST(GpuCrossEntropy, OutOfRangeTargetIsReportedAtTheNextSynchronisation) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  const Tensor logits = randn({4, 6}).to(Device::cuda(0));
  const Tensor target = tensor({1, 2, 9, 0}, {.dtype = DType::Int64}).to(Device::cuda(0));
  std::string msg;
  try {
    const Tensor loss = cross_entropy(logits, target);
    (void)loss.item();
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("cross_entropy: target 9 is out of range for 6 classes"), std::string::npos) << msg;
  // Reported once: the next forward with good targets runs clean.
  const Tensor ok = tensor({1, 2, 3, 0}, {.dtype = DType::Int64}).to(Device::cuda(0));
  EXPECT_NO_THROW((void)cross_entropy(logits, ok).item());
}

#if EMBER_WITH_CUDA
// The compute stream is a created non-blocking stream, not the legacy default stream: Ember's
// kernels can be captured into a CUDA graph and replayed.
TEST(GpuStreams, ComputeStreamIsCreatedNonBlockingAndGraphsCaptureIt) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Stream& s = get_stream(Device::cuda(0));
  auto cs = static_cast<cudaStream_t>(s.native_handle());
  ASSERT_NE(cs, nullptr) << "the compute stream is the legacy default stream";
  unsigned flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(cs, &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned>(cudaStreamNonBlocking));
  const Tensor a = randn({4097}).to(Device::cuda(0)), b = randn({4097}).to(Device::cuda(0));
  Tensor c = mul(add(a, b), a);  // warms the allocator's cache for the captured ops
  c = Tensor();
  s.synchronize();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed), cudaSuccess);
  c = mul(add(a, b), a);
  ASSERT_EQ(cudaStreamEndCapture(cs, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, cs), cudaSuccess);
  s.synchronize();
  const Tensor want = mul(add(a.cpu(), b.cpu()), a.cpu());
  EXPECT_LE(rel_err(c.cpu(), want), 1e-6);
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
}
#endif

#if EMBER_GPU_TESTS_HAVE_LAYERS
// Adam's multi-tensor step (a few launches for many parameters) and clip_grad_norm_'s one
// synchronisation, on the GPU against the CPU's per-tensor steps.
TEST(GpuOptim, MultiTensorAdamAndClipGradNormMatchTheCpu) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no CUDA device";
  Generator gen(5);
  std::vector<Tensor> pc, pg;
  for (int64_t n : {1, 37, 8192, 8193, 100'000, 3'000'000}) {
    for (int i = 0; i < 5; ++i) {  // 30 parameters: more than one launch's 24 slots
      Tensor p = randn({n}, {}, &gen);
      pc.push_back(p.clone().requires_grad_(true));
      pg.push_back(p.to(Device::cuda(0)).detach().requires_grad_(true));
    }
  }
  optim::Adam oc(pc, {.lr = 1e-2, .weight_decay = 0.01}), og(pg, {.lr = 1e-2, .weight_decay = 0.01});
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = randn(pc[i].shape(), {}, &gen);
      pc[i].set_grad(g.clone());
      pg[i].set_grad(g.to(Device::cuda(0)));
    }
    const double nc = optim::clip_grad_norm_(pc, 1.0), ng = optim::clip_grad_norm_(pg, 1.0);
    EXPECT_NEAR(ng, nc, 1e-5 * nc) << "step " << step;
    oc.step();
    og.step();
  }
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_LE(rel_err(pg[i].detach().cpu(), pc[i].detach()), 1e-5) << i;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!have_gpu()) std::cout << "skipped: no CUDA device" << std::endl;
  return RUN_ALL_TESTS();
}
