// One test per row of the autocast table (core/ops/autocast_table.h), in bfloat16 and float16:
//   LowPrecision rows: float32 operands under autocast give the 16-bit dtype, within that type's
//     rounding of the float32 result;
//   Float32 rows: 16-bit operands under autocast give float32, equal (to float32 rounding) to the
//     op on the same values widened by hand, so the math ran in float32, not in 16 bits;
//   Promote rows: a 16-bit and a float32 operand give float32, the op on the widened values.
// A row without a probe here fails the test, so a new row cannot go untested.
// Lives with the layers' tests because the table names linear and the losses (layers/functional).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "core/ops.h"
#include "layers/functional.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

using Inputs = std::vector<Tensor>;

struct Probe {
  std::function<Inputs(Generator&)> inputs;  // float32 (and integer) operands
  std::function<Tensor(const Inputs&)> run;
  // The dtype autocast must give, where it is not the class's (the fused conv + pool).
  std::optional<DType> expect = std::nullopt;
};

Tensor rn(Generator& g, Shape s) {
  return randn(std::move(s), {}, &g);
}
Tensor pos(Generator& g, Shape s) {  // positive, for log/pow/rsqrt
  return add(rand(std::move(s), {}, &g), 0.5);
}
Tensor unit(Generator& g, Shape s) {  // in (0, 1), for binary cross-entropy
  return add(mul(rand(std::move(s), {}, &g), 0.9), 0.05);
}

using Probes = std::map<std::string, Probe>;

void add_low_precision(Probes& p) {
  p["matmul"] = {[](Generator& g) {
                   return Inputs{rn(g, {2, 5, 7}), rn(g, {7, 3})};
                 },
                 [](const Inputs& x) { return matmul(x[0], x[1]); }};
  p["mm"] = {[](Generator& g) {
               return Inputs{rn(g, {6, 9}), rn(g, {9, 4})};
             },
             [](const Inputs& x) { return mm(x[0], x[1]); }};
  p["bmm"] = {[](Generator& g) {
                return Inputs{rn(g, {3, 4, 8}), rn(g, {3, 8, 5})};
              },
              [](const Inputs& x) { return bmm(x[0], x[1]); }};
  p["addmm"] = {[](Generator& g) {
                  return Inputs{rn(g, {5}), rn(g, {4, 6}), rn(g, {6, 5})};
                },
                [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }};
  p["linear"] = {[](Generator& g) {
                   return Inputs{rn(g, {3, 2, 8}), rn(g, {5, 8}), rn(g, {5})};
                 },
                 [](const Inputs& x) { return F::linear(x[0], x[1], x[2]); }};
  p["conv2d"] = {[](Generator& g) {
                   return Inputs{rn(g, {2, 3, 7, 7}), rn(g, {4, 3, 3, 3}), rn(g, {4})};
                 },
                 [](const Inputs& x) {
                   return conv2d(x[0], x[1], x[2], {.padding = {1, 1}});
                 }};
  p["conv_transpose2d"] = {[](Generator& g) {
                             return Inputs{rn(g, {2, 4, 5, 5}), rn(g, {4, 3, 3, 3}), rn(g, {3})};
                           },
                           [](const Inputs& x) {
                             return conv_transpose2d(x[0], x[1], x[2], {.stride = {2, 2}});
                           }};
  p["conv2d_max_pool2d"] = {[](Generator& g) {
                              return Inputs{rn(g, {2, 3, 8, 8}), rn(g, {4, 3, 3, 3}), rn(g, {4})};
                            },
                            [](const Inputs& x) {
                              return conv2d_max_pool2d(x[0], x[1], x[2], {.padding = {1, 1}}, {});
                            },
                            DType::Float32};
  p["rnn_layer"] = {[](Generator& g) {
                      return Inputs{rn(g, {4, 2, 3}), rn(g, {20, 3}), rn(g, {20, 5}), rn(g, {20}), rn(g, {20})};
                    },
                    [](const Inputs& x) {
                      RnnLayerResult r = rnn_layer(RnnMode::Lstm, x[0], x[1], x[2], x[3], x[4], Tensor(), Tensor());
                      return r.output;
                    }};
}

void add_float32_elementwise(Probes& p) {
  auto unary = [&](const char* name, std::function<Tensor(const Tensor&)> f, bool positive = false) {
    p[name] = {[positive](Generator& g) {
                 return Inputs{positive ? pos(g, {4, 9}) : rn(g, {4, 9})};
               },
               [f](const Inputs& x) { return f(x[0]); }};
  };
  unary("softmax", [](const Tensor& a) { return softmax(a, -1); });
  unary("log_softmax", [](const Tensor& a) { return log_softmax(a, -1); });
  unary("logsumexp", [](const Tensor& a) { return logsumexp(a, {1}); });
  unary("sum", [](const Tensor& a) { return sum(a, {1}); });
  unary("mean", [](const Tensor& a) { return mean(a); });
  unary("norm", [](const Tensor& a) { return norm(a); });
  unary("var", [](const Tensor& a) { return var(a, {0}); });
  unary("std", [](const Tensor& a) { return ember::std(a, {1}); });
  unary("exp", [](const Tensor& a) { return exp(a); });
  unary(
      "log", [](const Tensor& a) { return log(a); }, true);
  unary(
      "log1p", [](const Tensor& a) { return log1p(a); }, true);
  unary(
      "rsqrt", [](const Tensor& a) { return rsqrt(a); }, true);
  unary("softplus", [](const Tensor& a) { return softplus(a); });
  unary("relu", [](const Tensor& a) { return relu(a); });
  unary("leaky_relu", [](const Tensor& a) { return leaky_relu(a, 0.1); });
  unary("gelu", [](const Tensor& a) { return gelu(a); });
  unary("sigmoid", [](const Tensor& a) { return sigmoid(a); });
  unary("tanh", [](const Tensor& a) { return tanh(a); });
  unary("dropout", [](const Tensor& a) { return dropout(a, 0.5, false); });
}

void add_float32_layers(Probes& p) {
  p["pow"] = {[](Generator& g) {
                return Inputs{pos(g, {3, 5}), rn(g, {3, 5})};
              },
              [](const Inputs& x) { return add(pow(x[0], x[1]), pow(x[0], 1.5)); }};
  p["layer_norm"] = {[](Generator& g) {
                       return Inputs{rn(g, {3, 8}), rn(g, {8}), rn(g, {8})};
                     },
                     [](const Inputs& x) { return layer_norm(x[0], {8}, x[1], x[2]); }};
  p["batch_norm"] = {[](Generator& g) {
                       return Inputs{rn(g, {4, 3, 2, 2}), rn(g, {3}), rn(g, {3})};
                     },
                     [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-5); }};
  auto pooled = [&](const char* name, std::function<Tensor(const Tensor&)> f) {
    p[name] = {[](Generator& g) { return Inputs{rn(g, {2, 3, 6, 6})}; }, [f](const Inputs& x) { return f(x[0]); }};
  };
  pooled("max_pool2d", [](const Tensor& a) { return max_pool2d(a, 2); });
  pooled("avg_pool2d", [](const Tensor& a) { return avg_pool2d(a, {.kernel = {3, 3}, .stride = {1, 1}}); });
  pooled("adaptive_avg_pool2d", [](const Tensor& a) { return adaptive_avg_pool2d(a, {2, 2}); });
  p["cross_entropy"] = {[](Generator& g) {
                          return Inputs{rn(g, {6, 5}), randint(0, 5, {6}, {.dtype = DType::Int64}, &g), pos(g, {5})};
                        },
                        [](const Inputs& x) { return cross_entropy(x[0], x[1], {.weight = x[2]}); }};
  p["nll_loss"] = {[](Generator& g) {
                     return Inputs{log_softmax(rn(g, {6, 5}), -1), randint(0, 5, {6}, {.dtype = DType::Int64}, &g)};
                   },
                   [](const Inputs& x) { return F::nll_loss(x[0], x[1]); }};
  auto loss = [&](const char* name, std::function<Tensor(const Tensor&, const Tensor&)> f, bool unit_input = false) {
    p[name] = {[unit_input](Generator& g) {
                 return Inputs{unit_input ? unit(g, {4, 6}) : rn(g, {4, 6}), unit(g, {4, 6})};
               },
               [f](const Inputs& x) { return f(x[0], x[1]); }};
  };
  loss("mse_loss", [](const Tensor& a, const Tensor& b) { return F::mse_loss(a, b); });
  loss("l1_loss", [](const Tensor& a, const Tensor& b) { return F::l1_loss(a, b); });
  loss("smooth_l1_loss", [](const Tensor& a, const Tensor& b) { return F::smooth_l1_loss(a, b); });
  loss("kl_div", [](const Tensor& a, const Tensor& b) { return F::kl_div(a, b); });
  loss(
      "binary_cross_entropy", [](const Tensor& a, const Tensor& b) { return F::binary_cross_entropy(a, b); }, true);
  loss("binary_cross_entropy_with_logits",
       [](const Tensor& a, const Tensor& b) { return F::binary_cross_entropy_with_logits(a, b); });
}

void add_promote(Probes& p) {
  auto binary = [&](const char* name, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    p[name] = {[](Generator& g) {
                 return Inputs{pos(g, {3, 4}), pos(g, {4})};
               },
               [f](const Inputs& x) { return f(x[0], x[1]); }};
  };
  binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b); });
  binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary("div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); });
  binary("where", [](const Tensor& a, const Tensor& b) { return where(gt(b, 1.0), a, b); });
}

Probes probes() {
  Probes p;
  add_low_precision(p);
  add_float32_elementwise(p);
  add_float32_layers(p);
  add_promote(p);
  return p;
}

// max |got - want| / (1 + max |want|), in double.
double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    err = std::max(err, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return err / (1 + scale);
}

// The operands as a Float32 or Promote row gets them: the 16-bit ones (all floating operands,
// or only the first for Promote), and the same values widened back to float32.
void narrowed(const Inputs& x, AutocastClass cls, DType dt, Inputs& low, Inputs& wide) {
  for (size_t i = 0; i < x.size(); ++i) {
    const bool narrow = x[i].dtype() == DType::Float32 && (cls == AutocastClass::Float32 || i == 0);
    low.push_back(narrow ? x[i].to(dt) : x[i]);
    wide.push_back(narrow ? low.back().to(DType::Float32) : x[i]);
  }
}

void check_row(const AutocastRow& row, const Probe& probe, DType dt) {
  SCOPED_TRACE(std::string(row.name) + " in " + dtype_name(dt));
  Generator gen(51);
  const Inputs x = probe.inputs(gen);
  if (row.cls == AutocastClass::LowPrecision) {
    const Tensor want = probe.run(x);
    Tensor got;
    {
      autocast ac(Device::cpu(), dt);
      got = probe.run(x);
    }
    EXPECT_EQ(got.dtype(), probe.expect.value_or(dt));
    // The operands' rounding (2^-8 bfloat16, 2^-11 float16) over a few dozen products, and the
    // result's own.
    EXPECT_LT(relative_error(got, want), dt == DType::BFloat16 ? 3e-2 : 4e-3);
    return;
  }
  Inputs low, wide;
  narrowed(x, row.cls, dt, low, wide);
  const Tensor want = probe.run(wide);
  Tensor got;
  {
    autocast ac(Device::cpu(), dt);
    got = probe.run(low);
  }
  EXPECT_EQ(got.dtype(), DType::Float32);
  EXPECT_LT(relative_error(got, want), 1e-5);  // float32 arithmetic on the same values
}

}  // namespace

TEST(AutocastTable, EveryRowHasAProbe) {
  const auto p = probes();
  for (const AutocastRow& row : autocast_table()) EXPECT_TRUE(p.count(row.name)) << row.name << " has no test";
  EXPECT_EQ(p.size(), autocast_table().size()) << "a probe names an op the table lacks";
}

TEST(AutocastTable, EveryRowBFloat16) {
  const auto p = probes();
  for (const AutocastRow& row : autocast_table())
    if (p.count(row.name)) check_row(row, p.at(row.name), DType::BFloat16);
}

TEST(AutocastTable, EveryRowFloat16) {
  const auto p = probes();
  for (const AutocastRow& row : autocast_table())
    if (p.count(row.name)) check_row(row, p.at(row.name), DType::Float16);
}

// Outside a scope nothing is cast: every row's op on float32 gives float32.
TEST(AutocastTable, NothingChangesOutsideAScope) {
  const auto p = probes();
  Generator gen(7);
  for (const AutocastRow& row : autocast_table()) {
    if (!p.count(row.name)) continue;
    EXPECT_EQ(p.at(row.name).run(p.at(row.name).inputs(gen)).dtype(), DType::Float32) << row.name;
  }
}
