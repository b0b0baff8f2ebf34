// The GPU test label: every op of the table below runs on cuda:0 and on the CPU from the same
// random inputs, forward and backward, once with the native kernels and once with the vendor ones
// (EMBER_KERNELS=native / vendor), and the outputs and input gradients are compared. The table
// is keyed by op name, so a kernel that registers for an op is covered by its row without any
// change here; a new op needs one row. Without a GPU every test skips and the program prints
// "skipped: no CUDA device" (ctest reports it as skipped, tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!have_gpu()) std::cout << "skipped: no CUDA device" << std::endl;
  return RUN_ALL_TESTS();
}
