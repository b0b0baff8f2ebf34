// The CPU capability levels agree with each other: every kernel family run at each level this CPU
// has (set_cpu_capability), on the same inputs, against the baseline level. Floating-point results
// may differ by rounding (FMA contracts a*b+c into one rounding, wider vectors sum in another
// order), so they are compared within a relative tolerance; integer, bool and index results, and
// random masks, must be identical. The selection itself (EMBER_CPU_CAPABILITY's parsing, the
// errors for a level this CPU or build lacks) is tested here too.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/blas_kernels.h"
#include "core/cpu_capability.h"
#include "core/dispatch.h"
#include "core/gemm_kernels.h"
#include "core/ops.h"
#include "core/ops/nn.h"
#include "core/ops/rnn.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {

// Restores the level in force when the test began.
class CpuLevels : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = cpu_capability(); }
  void TearDown() override { set_cpu_capability(saved_); }
  CpuCapability saved_ = CpuCapability::Baseline;
};

struct LevelCase {
  std::string name;
  std::function<std::vector<Tensor>()> inputs;                         // made once, reused at each level
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;  // outputs (and gradients)
};

// x as a fresh leaf that requires grad (so each level's backward starts from the same state).
Tensor leaf(const Tensor& x) {
  return x.detach().clone().requires_grad_();
}

// A float32 normal tensor of shape s drawn from seed: the same inputs at every level.
Tensor f32(Shape s, uint64_t seed) {
  Generator g(seed);
  return randn(s, {}, &g);
}

// Elementwise kernels: arithmetic, math, activations, comparisons and integers.
void add_elementwise_cases(std::vector<LevelCase>& v) {
  v.push_back({"binary and broadcast",
               [&] {
                 return std::vector<Tensor>{f32({37, 129}, 1), f32({129}, 2)};
               },
               [](const std::vector<Tensor>& in) {
                 const Tensor &a = in[0], &b = in[1];
                 return std::vector<Tensor>{add(a, b, 0.5), sub(a, b),     mul(a, b),       div(a, add(abs(b), 1.0)),
                                            maximum(a, b),  minimum(a, b), pow(abs(a), 1.7)};
               }});
  v.push_back({"unary math", [&] { return std::vector<Tensor>{f32({1031}, 3)}; },
               [](const std::vector<Tensor>& in) {
                 const Tensor& a = in[0];
                 return std::vector<Tensor>{exp(a),
                                            log(add(abs(a), 0.1)),
                                            log1p(abs(a)),
                                            sqrt(abs(a)),
                                            rsqrt(add(abs(a), 0.5)),
                                            tanh(a),
                                            sigmoid(a),
                                            gelu(a),
                                            gelu(a, true),
                                            elu(a),
                                            softplus(a),
                                            leaky_relu(a),
                                            relu(a),
                                            clamp(a, -0.5, 0.7),
                                            sign(a),
                                            neg(a),
                                            square(a)};
               }});
  v.push_back({"activation gradients", [&] { return std::vector<Tensor>{f32({517}, 4)}; },
               [](const std::vector<Tensor>& in) {
                 Tensor x = leaf(in[0]);
                 (sigmoid(x) * tanh(x) + gelu(x) + elu(x) + softplus(x) + relu(x)).sum().backward();
                 return std::vector<Tensor>{x.grad()};
               }});
  v.push_back(
      {"compare, logical, where (exact)",
       [&] {
         return std::vector<Tensor>{f32({301}, 5), f32({301}, 6)};
       },
       [](const std::vector<Tensor>& in) {
         const Tensor &a = in[0], &b = in[1];
         Tensor gt_ = gt(a, b), le_ = le(a, 0.25);
         return std::vector<Tensor>{
             gt_, eq(a, a), ne(a, b), logical_and(gt_, le_), logical_or(gt_, le_), logical_not(gt_), where(gt_, a, b)};
       }});
  v.push_back(
      {"integer arithmetic (exact)",
       [] {
         Generator g(7);
         return std::vector<Tensor>{randint(-1000, 1000, {513}, {.dtype = DType::Int64}, &g),
                                    randint(1, 50, {513}, {.dtype = DType::Int32}, &g)};
       },
       [](const std::vector<Tensor>& in) {
         const Tensor& a = in[0];
         const Tensor b = in[1].to(DType::Int64);
         return std::vector<Tensor>{
             add(a, b), mul(a, b), sub(a, b), maximum(a, b), abs(a), sum(a), in[1].to(DType::Float32).to(DType::Int32)};
       }});
}

// Reductions, softmax and cross-entropy, conv, pooling, norms.
void add_reduction_and_nn_cases(std::vector<LevelCase>& v) {
  v.push_back({"reductions",
               [&] {
                 return std::vector<Tensor>{f32({23, 67, 5}, 8)};
               },
               [](const std::vector<Tensor>& in) {
                 const Tensor& a = in[0];
                 auto [mx, imx] = max(a, 1);
                 return std::vector<Tensor>{sum(a),
                                            sum(a, {1}),
                                            mean(a, {0, 2}),
                                            var(a, {1}),
                                            ember::std(a, {2}),
                                            amax(a, {0}),
                                            amin(a, {2}),
                                            mx,
                                            imx,
                                            argmin(a, 2),
                                            norm(a),
                                            prod(a, 2),
                                            logsumexp(a, {1}),
                                            softmax(a, 1),
                                            log_softmax(a, 2)};
               }});
  v.push_back({"softmax and cross-entropy gradients",
               [&] {
                 return std::vector<Tensor>{f32({64, 10}, 9)};
               },
               [](const std::vector<Tensor>& in) {
                 Tensor x = leaf(in[0]);
                 Tensor target = argmax(in[0].detach() * -1.0, 1);
                 Tensor loss = cross_entropy(x, target, {.label_smoothing = 0.1});
                 (loss + square(softmax(x, 1)).sum() + log_softmax(x, 0).mean()).backward();
                 return std::vector<Tensor>{loss.detach(), x.grad()};
               }});
  v.push_back({"conv2d forward and backward",
               [&] {
                 return std::vector<Tensor>{f32({3, 5, 13, 11}, 10), f32({7, 5, 3, 3}, 11), f32({7}, 12)};
               },
               [](const std::vector<Tensor>& in) {
                 Tensor x = leaf(in[0]), w = leaf(in[1]), b = leaf(in[2]);
                 Tensor y = conv2d(x, w, b, {.stride = {2, 1}, .padding = {1, 1}});
                 Tensor z = conv_transpose2d(y, w.detach(), Tensor(), {.stride = {2, 2}, .padding = {1, 0}});
                 (square(y).sum() + z.mean()).backward();
                 return std::vector<Tensor>{y.detach(), z.detach(), x.grad(), w.grad(), b.grad()};
               }});
  v.push_back({"pooling forward and backward",
               [&] {
                 return std::vector<Tensor>{f32({2, 3, 15, 14}, 13)};
               },
               [](const std::vector<Tensor>& in) {
                 Tensor x = leaf(in[0]);
                 auto [m, idx] = max_pool2d_with_indices(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
                 Tensor a = avg_pool2d(x, {.kernel = {2, 3}, .ceil_mode = true, .count_include_pad = false});
                 Tensor ad = adaptive_avg_pool2d(x, {4, 5});
                 (m.sum() + square(a).sum() + ad.mean()).backward();
                 return std::vector<Tensor>{m.detach(), idx, a.detach(), ad.detach(), x.grad()};
               }});
  v.push_back({"batch and layer norm",
               [&] {
                 return std::vector<Tensor>{f32({8, 6, 5, 4}, 14), f32({6}, 15), f32({6}, 16)};
               },
               [](const std::vector<Tensor>& in) {
                 Tensor x = leaf(in[0]), w = leaf(in[1]), b = leaf(in[2]);
                 Tensor rm = zeros({6}), rv = ones({6});
                 Tensor y = batch_norm(x, rm, rv, w, b, true);
                 Tensor z = layer_norm(x, {5, 4});
                 (square(y).sum() + (z * z.detach()).sum()).backward();
                 return std::vector<Tensor>{y.detach(), z.detach(), rm, rv, x.grad(), w.grad(), b.grad()};
               }});
}

// RNN layers, matmul, copies and casts, random masks, index ops.
void add_rnn_matmul_copy_index_cases(std::vector<LevelCase>& v) {
  for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh}) {
    const int64_t gates = mode == RnnMode::Lstm ? 4 : mode == RnnMode::Gru ? 3 : 1;
    v.push_back({std::string("recurrent layer, mode ") + std::to_string(static_cast<int>(mode)),
                 [&, gates] {
                   return std::vector<Tensor>{f32({9, 4, 6}, 17), f32({gates * 16, 6}, 18) * 0.3,
                                              f32({gates * 16, 16}, 19) * 0.3, f32({gates * 16}, 20) * 0.1,
                                              f32({gates * 16}, 21) * 0.1};
                 },
                 [mode](const std::vector<Tensor>& in) {
                   Tensor x = leaf(in[0]), wi = leaf(in[1]), wh = leaf(in[2]), bi = leaf(in[3]), bh = leaf(in[4]);
                   RnnLayerResult r = rnn_layer(mode, x, wi, wh, bi, bh, zeros({4, 16}),
                                                mode == RnnMode::Lstm ? zeros({4, 16}) : Tensor());
                   (square(r.output).sum() + r.h_n.sum()).backward();
                   return std::vector<Tensor>{r.output.detach(), x.grad(), wi.grad(), wh.grad(), bi.grad()};
                 }});
  }
  v.push_back(
      {"matmul",
       [&] {
         return std::vector<Tensor>{f32({33, 47}, 22), f32({47, 29}, 23)};
       },
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{matmul(in[0], in[1]), matmul(in[0].to(DType::Float64), in[1].to(DType::Float64))};
       }});
  v.push_back({"copy and cast",
               [&] {
                 return std::vector<Tensor>{f32({19, 31}, 24) * 100.0};
               },
               [](const std::vector<Tensor>& in) {
                 const Tensor& a = in[0];
                 return std::vector<Tensor>{a.transpose(0, 1).contiguous(),
                                            a.to(DType::Float16).to(DType::Float32),
                                            a.to(DType::BFloat16).to(DType::Float32),
                                            a.to(DType::Float64),
                                            a.to(DType::Int32),
                                            a.to(DType::UInt8),
                                            a.to(DType::Bool)};
               }});
  v.push_back({"random and dropout (exact masks)", [] { return std::vector<Tensor>{ones({4097})}; },
               [](const std::vector<Tensor>& in) {
                 Generator g(99);
                 Tensor u = rand({4097}, {}, &g), n = randn({4097}, {}, &g);
                 Tensor mask = bernoulli({4097}, 0.3, {}, &g);
                 Tensor d = dropout(in[0], 0.4, true, &g);
                 Tensor ri = randint(0, 1000, {257}, {.dtype = DType::Int64}, &g);
                 return std::vector<Tensor>{u, n, mask.to(DType::UInt8), eq(d, 0.0), ri};
               }});
  v.push_back({"index, gather, scatter, sort (exact)",
               [&] {
                 return std::vector<Tensor>{f32({17, 23}, 25)};
               },
               [](const std::vector<Tensor>& in) {
                 const Tensor& a = in[0];
                 Tensor idx = argmax(a, 1, true);
                 auto [sv, si] = sort(a, 1);
                 auto [tv, ti] = topk(a, 5, 0);
                 return std::vector<Tensor>{gather(a, 1, idx),
                                            index_select(a, 0, arange(0, 17, 3)),
                                            scatter_add(zeros({17, 23}), 1, idx, ones({17, 1})),
                                            masked_fill(a, gt(a, 0.5), -1.0),
                                            sv,
                                            si,
                                            tv,
                                            ti,
                                            tril(a),
                                            triu(a, 2),
                                            pad(a, {1, 2, 3, 0}, PadMode::Reflect),
                                            one_hot(si.select(1, 0), 23)};
               }});
}

std::vector<LevelCase> cases() {
  std::vector<LevelCase> v;
  add_elementwise_cases(v);
  add_reduction_and_nn_cases(v);
  add_rnn_matmul_copy_index_cases(v);
  return v;
}

bool floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

// Where a and b differ beyond the tolerance ("" when they agree).
std::string difference(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return "shapes or dtypes differ";
  const std::vector<double> x = vec(a.to(DType::Float64)), y = vec(b.to(DType::Float64));
  const bool exact = !floating(a.dtype());
  double scale = 0.0;
  for (double v : x) scale = std::isfinite(v) ? std::max(scale, std::fabs(v)) : scale;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    const double tol = exact ? 0.0 : 2e-4 * std::fabs(x[i]) + 2e-5 * std::max(scale, 1.0);
    if (!(std::fabs(x[i] - y[i]) <= tol))
      return "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " against " + std::to_string(y[i]);
  }
  return "";
}

}  // namespace

TEST_F(CpuLevels, EveryKernelFamilyAgreesWithTheBaselineAtEveryLevelThisCpuHas) {
  const std::vector<CpuCapability> levels = cpu_capabilities_available();
  if (levels.size() < 2)
    GTEST_SKIP() << "skipped: one CPU level here (" << cpu_capability_name(levels.at(0)) << "), nothing to compare";
  for (const LevelCase& c : cases()) {
    const std::vector<Tensor> in = c.inputs();
    set_cpu_capability(levels.front());
    const std::vector<Tensor> ref = c.run(in);
    for (size_t l = 1; l < levels.size(); ++l) {
      set_cpu_capability(levels[l]);
      const std::vector<Tensor> got = c.run(in);
      ASSERT_EQ(got.size(), ref.size()) << c.name;
      for (size_t k = 0; k < ref.size(); ++k)
        EXPECT_EQ(difference(ref[k], got[k]), "")
            << c.name << ", output " << k << ": " << cpu_capability_name(levels[l]) << " against "
            << cpu_capability_name(levels.front());
    }
  }
}

TEST_F(CpuLevels, NamesParseAndBadNamesAreRefused) {
  for (int i = 0; i < kNumCpuCapabilities; ++i) {
    const auto c = static_cast<CpuCapability>(i);
    EXPECT_EQ(parse_cpu_capability(cpu_capability_name(c)), c);
  }
  EXPECT_STREQ(cpu_capability_name(CpuCapability::Avx512Bf16), "avx512bf16");
  expect_error([] { parse_cpu_capability("AVX2"); }, "'AVX2' is not a CPU capability level",
               "expected baseline, avx2, avx512, avx512bf16 or native");
  expect_error([] { parse_cpu_capability(""); }, "'' is not a CPU capability level");
}

TEST_F(CpuLevels, TheDefaultIsTheBestAvailableAndEveryLevelRunsKernels) {
  const std::vector<CpuCapability> levels = cpu_capabilities_available();
  ASSERT_FALSE(levels.empty());
  if (!std::getenv("EMBER_CPU_CAPABILITY") && !std::getenv("EMBER_TEST_CPU_LEVEL")) {
    EXPECT_EQ(cpu_capability(), levels.back());
  }
  for (CpuCapability c : levels) {
    set_cpu_capability(c);
    EXPECT_EQ(cpu_capability(), c);
    EXPECT_EQ(vec(add(tensor({1, 2}), tensor({3, 4}))), (std::vector<double>{4, 6})) << cpu_capability_name(c);
  }
  EXPECT_NE(cpu_description().find(cpu_capability_name(levels.back())), std::string::npos) << cpu_description();
  // The banner names OpenBLAS's kernels too, and the CPU's family and model where cpuid has them.
  EXPECT_NE(cpu_description().find("OpenBLAS " + blas_kernels_description()), std::string::npos) << cpu_description();
  EXPECT_NE(blas_kernels().name, "unknown");
#if defined(__x86_64__)
  EXPECT_NE(cpu_model_name().find("(family "), std::string::npos) << cpu_model_name();
#endif
}

TEST_F(CpuLevels, ALevelThisCpuOrBuildLacksIsAnErrorNamingIt) {
  for (int i = 0; i < kNumCpuCapabilities; ++i) {
    const auto c = static_cast<CpuCapability>(i);
    const std::vector<CpuCapability> av = cpu_capabilities_available();
    if (std::find(av.begin(), av.end(), c) != av.end()) continue;
    const std::string msg = error_of([c] { set_cpu_capability(c); });
    EXPECT_TRUE(has(msg, std::string("set_cpu_capability(") + cpu_capability_name(c) + ")")) << msg;
    EXPECT_TRUE(has(msg, "lacks") || has(msg, "has no such kernels")) << msg;
  }
}

// The kernel's own flag list (/proc/cpuinfo) says what cpuid and XCR0 say: a level is detected
// exactly where the CPU has it (a wrong cpuid bit would take the vdpbf16ps kernels to a CPU that
// faults on them, or keep them from one that has them).
TEST_F(CpuLevels, Avx512Bf16IsDetectedWhereTheKernelListsTheFlag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  if (flags.empty()) GTEST_SKIP() << "skipped: no /proc/cpuinfo flags line here";
  const bool listed = has(flags, " avx512_bf16 ") && has(flags, " avx512f ") && has(flags, " avx512bw ") &&
                      has(flags, " avx512vl ") && has(flags, " avx512dq ") && has(flags, " avx512cd ");
  EXPECT_EQ(cpu_supports(CpuCapability::Avx512Bf16), listed) << flags;
  EXPECT_EQ(has(cpu_feature_list(), "avx512bf16"), has(flags, " avx512_bf16 ")) << cpu_feature_list();
}

namespace {
std::map<const void*, int> g_levels_seen;
void see_level(const void* stub, DeviceType t, int cpu_level) {
  if (t == DeviceType::CPU) g_levels_seen[stub] = cpu_level;
}
}  // namespace

// At avx512bf16 the GEMM runs its own copy, and a stub no avx512bf16 file registers (add) its
// avx512 kernel: the level is compiled for a few files only (cmake/EmberCpuDispatch.cmake).
TEST_F(CpuLevels, Avx512Bf16RunsItsGemmAndTheAvx512KernelsOfEveryOtherStub) {
  if (!cpu_supports(CpuCapability::Avx512Bf16)) GTEST_SKIP() << "skipped: this CPU lacks avx512bf16";
  const std::vector<CpuCapability> built = cpu_capabilities_built();
  if (std::find(built.begin(), built.end(), CpuCapability::Avx512Bf16) == built.end())
    GTEST_SKIP() << "skipped: this build has no avx512bf16 kernels";
  set_cpu_capability(CpuCapability::Avx512Bf16);
  g_levels_seen.clear();
  set_dispatch_observer(&see_level);
  const Tensor c = mm(tensor({1, 2}).reshape({1, 2}), tensor({3, 4}).reshape({2, 1}));
  const Tensor d = add(tensor({1, 2}), tensor({3, 4}));
  set_dispatch_observer(nullptr);
  EXPECT_EQ(vec(c), (std::vector<double>{11}));
  EXPECT_EQ(vec(d), (std::vector<double>{4, 6}));
  EXPECT_EQ(g_levels_seen[&gemm_stub], static_cast<int>(CpuCapability::Avx512Bf16));
  bool some_avx512 = false;
  for (const auto& [stub, level] : g_levels_seen) some_avx512 |= level == static_cast<int>(CpuCapability::Avx512);
  EXPECT_TRUE(some_avx512) << "add's kernel should come from the avx512 level";
}
