// Rows: binary and unary elementwise ops, activations, comparisons, logic, selection, casts,
// fills and random fills (core/elementwise_kernels.h, core/copy.h, core/random.h).
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "op_table.h"
#include "oracle.h"

namespace ember::ops_test {
namespace {

using Binary = Tensor (*)(const Tensor&, const Tensor&);

// Small integers in halves make ties; NaN, infinities and signed zeros are planted so that a bool
// that disagrees anywhere fails (the comparison rows are exact).
Tensor tricky(Generator& g, Shape s) {
  Tensor x = mul(randint(-4, 5, s, {.dtype = DType::Float32}, &g), 0.5);
  x = masked_fill(x, gt(rn(g, s), 1.5), NAN);
  x = masked_fill(x, lt(rn(g, s), -1.8), -INFINITY);
  return masked_fill(x, lt(rn(g, s), -1.6), -0.0);
}

Tensor uniform(Generator& g, Shape s, double lo, double hi, DType dt = DType::Float32) {
  return add(mul(rand(std::move(s), {.dtype = DType::Float64}, &g), hi - lo), lo).to(dt);
}

// A unary op with the input range it is checked over (kept away from its kinks and poles).
using Unary = std::function<Tensor(const Tensor&)>;
struct Ranged {
  const char* name;
  Unary f;
  double lo, hi;
};

void add_strided_and_rounding_rows(std::vector<OpRow>& t) {
  // The same bits from a contiguous input (vectorised) and from a transposed one (strided), in
  // a tensor above the parallel grain: the harness's strided run hands f a transposed view.
  const std::vector<Ranged> layouts = {
      {"exp", [](const Tensor& x) { return exp(x); }, -90, 90},
      {"log", [](const Tensor& x) { return log(x); }, 0, 100},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -1, 10},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0, 100},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0, 100},
      {"pow2_5", [](const Tensor& x) { return pow(x, 2.5); }, 0, 10},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -30, 30},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -10, 10},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -10, 10},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, -10, 10},
      {"elu", [](const Tensor& x) { return elu(x); }, -10, 10},
      {"softplus_beta3_threshold10", [](const Tensor& x) { return softplus(x, 3.0, 10.0); }, -10, 10},
      {"relu", [](const Tensor& x) { return relu(x); }, -1, 1},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }, -1, 1},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.5); }, -1, 1},
  };
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Ranged& op : layouts)
      t.push_back({std::string(op.name) + "_strided_equals_contiguous_" + dtype_name(dt),
                   [lo = op.lo, hi = op.hi, dt](Generator& g) {
                     return Inputs{uniform(g, {200, 180}, lo, hi, dt)};
                   },
                   [f = op.f](const Inputs& x) {
                     // Where the two differ, NaN against NaN aside (exp overflows to inf in float32).
                     const Tensor a = f(x[0]), b = f(x[0].contiguous());
                     return logical_and(ne(a, b), logical_not(logical_and(ne(a, a), ne(b, b))));
                   },
                   0.0, false, false});

  // float32 arithmetic correctly rounded: each element's error relative to the float64 result of
  // the same (float32-rounded) inputs, at most two units in the last place.
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Binary>> arithmetic = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"add_alpha3", [](const Tensor& a, const Tensor& b) { return add(a, b, 3.0); }},
      {"pow_of_abs", [](const Tensor& a, const Tensor& b) { return pow(abs(a), b); }},
  };
  for (const auto& [name, f] : arithmetic) {
    t.push_back({std::string(name) + "_float32_correctly_rounded",
                 [](Generator& g) {
                   return Inputs{rn(g, {3, 7}), add(rn(g, {3, 7}), 4.0)};
                 },
                 [f = f](const Inputs& x) {
                   const Tensor want = f(x[0].to(DType::Float64), x[1].to(DType::Float64));
                   return div(abs(sub(f(x[0], x[1]).to(DType::Float64), want)), abs(want));
                 },
                 0.0, false, false});
    // The row's result is the float32 result's relative error (want: 0): at most 2.4e-7 (two units
    // of 2^-24), an absolute bound on that error.
    t.back().atol = 2.4e-7;
  }
}

void add_unary_backward_gradcheck_rows(std::vector<OpRow>& t) {
  // The float32 backward kernels against float64's (forward and gradients to 4e-6 and 2e-5 of
  // each element, with float32's absolute floor).
  const std::vector<Ranged> backward = {
      {"exp", [](const Tensor& x) { return exp(x); }, -5, 5},
      {"log", [](const Tensor& x) { return log(x); }, 0.1, 5},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -0.9, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.1, 5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.1, 5},
      {"abs", [](const Tensor& x) { return abs(x); }, -5, 5},
      {"square", [](const Tensor& x) { return square(x); }, -5, 5},
      {"clamp", [](const Tensor& x) { return clamp(x, -1.0, 1.0); }, -2, 2},
      {"pow1_7", [](const Tensor& x) { return pow(x, 1.7); }, 0.1, 5},
      {"relu", [](const Tensor& x) { return relu(x); }, -5, 5},
      {"leaky_relu0_3", [](const Tensor& x) { return leaky_relu(x, 0.3); }, -5, 5},
      {"elu0_7", [](const Tensor& x) { return elu(x, 0.7); }, -5, 5},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -8, 8},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, -8, 8},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -15, 15},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -8, 8},
      {"softplus_beta1_5_threshold6", [](const Tensor& x) { return softplus(x, 1.5, 6.0); }, -8, 8},
  };
  for (const Ranged& op : backward)
    t.push_back({std::string(op.name) + "_float32_backward_2000",
                 [lo = op.lo, hi = op.hi](Generator& g) { return Inputs{uniform(g, {2000}, lo, hi)}; },
                 [f = op.f](const Inputs& x) { return f(x[0]); }, 4e-6, true, false});

  // Finite differences of every unary op and activation on a contiguous input and through a
  // transposed, stepped view of a bigger one; the ranges avoid the kinks (differences straddling
  // them would be wrong, not the op).
  std::vector<Ranged> gradchecked = {
      {"neg", [](const Tensor& x) { return neg(x); }, -2, 2},
      {"abs_times_x", [](const Tensor& x) { return mul(abs(x), x); }, 0.1, 2},
      {"abs_negative", [](const Tensor& x) { return abs(x); }, -2, -0.1},
      {"sign_times_x", [](const Tensor& x) { return mul(sign(x), x); }, -2, -0.1},
      {"exp", [](const Tensor& x) { return exp(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, 0.2, 3},
      {"log1p", [](const Tensor& x) { return log1p(x); }, -0.8, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, 0.2, 3},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, 0.2, 3},
      {"square", [](const Tensor& x) { return square(x); }, -2, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.503, 0.497); }, -1, 1},
      {"clamp_min", [](const Tensor& x) { return clamp(x, 0.013, std::nullopt); }, -1, 1},
      {"relu", [](const Tensor& x) { return relu(x); }, -2, 2},
      {"leaky_relu0_2", [](const Tensor& x) { return leaky_relu(x, 0.2); }, -2, 2},
      {"elu1_3", [](const Tensor& x) { return elu(x, 1.3); }, -3, 2},
      {"gelu", [](const Tensor& x) { return gelu(x); }, -4, 4},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, -4, 4},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, -4, 4},
      {"tanh", [](const Tensor& x) { return tanh(x); }, -3, 3},
      {"softplus", [](const Tensor& x) { return softplus(x); }, -4, 4},
      {"softplus_beta2_threshold3", [](const Tensor& x) { return softplus(x, 2.0, 3.0); }, -3, 3},
  };
  for (const auto& [name, e] : std::vector<std::pair<const char*, double>>{{"pow0", 0.0},
                                                                           {"pow1", 1.0},
                                                                           {"pow2", 2.0},
                                                                           {"pow3", 3.0},
                                                                           {"pow_minus1", -1.0},
                                                                           {"pow0_5", 0.5},
                                                                           {"pow_minus0_5", -0.5},
                                                                           {"pow1_7", 1.7},
                                                                           {"pow_minus2_3", -2.3}})
    gradchecked.push_back({name, [e = e](const Tensor& x) { return pow(x, e); }, 0.3, 2});
  for (const Ranged& op : gradchecked) {
    t.push_back({std::string("gradcheck_") + op.name,
                 [lo = op.lo, hi = op.hi](Generator& g) {
                   return Inputs{uniform(g, {3, 4}, lo, hi)};
                 },
                 [f = op.f](const Inputs& x) { return f(x[0]); }});
    t.push_back({std::string("gradcheck_") + op.name + "_through_a_view",
                 [lo = op.lo, hi = op.hi](Generator& g) {
                   return Inputs{uniform(g, {6, 3}, lo, hi)};
                 },
                 [f = op.f](const Inputs& x) { return f(x[0].t().slice(1, 0, 6, 2)); }});
  }
}

void add_binary_view_gradcheck_rows(std::vector<OpRow>& t) {
  // Binary ops with broadcasting both ways, alpha, and a divisor or base kept positive.
  const std::vector<std::pair<const char*, std::function<Tensor(const Inputs&)>>> broadcast = {
      {"add_alpha1_5", [](const Inputs& x) { return add(x[0], x[1], 1.5); }},
      {"sub_alpha_minus2", [](const Inputs& x) { return sub(x[0], x[1], -2.0); }},
      {"sub_smaller_first", [](const Inputs& x) { return sub(x[1], x[0]); }},
      {"mul", [](const Inputs& x) { return mul(x[0], x[1]); }},
      {"div", [](const Inputs& x) { return div(x[0], x[2]); }},
      {"div_smaller_over_larger", [](const Inputs& x) { return div(x[2], x[3]); }},
      {"maximum", [](const Inputs& x) { return maximum(x[0], x[1]); }},
      {"minimum", [](const Inputs& x) { return minimum(x[0], x[1]); }},
      {"pow_broadcast_base", [](const Inputs& x) { return pow(x[2], x[0]); }},
  };
  for (const auto& [name, f] : broadcast)
    t.push_back({std::string("gradcheck_") + name + "_broadcast",
                 [](Generator& g) {
                   return Inputs{rn(g, {3, 4}), rn(g, {4}), uniform(g, {3, 1}, 0.5, 2.0), pos(g, {3, 4})};
                 },
                 f});
  // Through views: a transposed operand against a stepped slice.
  auto stepped = [](const Tensor& b) { return b.slice(1, 0, 8, 2); };
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> viewed = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(b, a); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, sub(b, 1.0)); }},
  };
  for (const auto& [name, f] : viewed)
    t.push_back({std::string("gradcheck_") + name + "_transposed_and_stepped_views",
                 [](Generator& g) {
                   return Inputs{rn(g, {4, 3}), uniform(g, {3, 8}, 0.5, 2.0)};
                 },
                 [f = f, stepped](const Inputs& x) { return f(x[0].t(), stepped(x[1])); }});
  t.push_back(
      {"gradcheck_scalar_operands",
       [](Generator& g) {
         return Inputs{uniform(g, {2, 3}, 0.5, 2.0)};
       },
       [](const Inputs& x) {
         return stack({add(x[0], 2.0), rsub(x[0], 3.0), mul(x[0], -1.5), div(x[0], 3.0), 2.0 / x[0], neg(x[0])});
       }});
}

void add_where_gradcheck_rows(std::vector<OpRow>& t) {
  // where with a broadcast condition and operands, and with a 1-D condition against a transposed
  // operand.
  t.push_back({"gradcheck_where_broadcast",
               [](Generator& g) {
                 return Inputs{ints(g, 0, 2, {3, 1}), rn(g, {3, 4}), rn(g, {4})};
               },
               [](const Inputs& x) {
                 return where(ne(x[0], 0).expand({3, 4}).contiguous(), x[1], x[2]);
               }});
  t.push_back({"gradcheck_where_condition_1d_transposed_operand",
               [](Generator& g) {
                 return Inputs{from_vector<int64_t>({1, 0, 1, 0}, {4}), rn(g, {4}), rn(g, {4, 2})};
               },
               [](const Inputs& x) { return where(ne(x[0], 0), x[1], x[2].t()); }});
  // float64 through views: a transposed operand times an expanded one, and stepped rows minus a
  // broadcast row; where with a transposed condition.
  t.push_back(
      {"binary_float64_transposed_expanded_stepped",
       [](Generator& g) {
         return Inputs{randn({6, 4}, {.dtype = DType::Float64}, &g), randn({4, 1}, {.dtype = DType::Float64}, &g)};
       },
       [](const Inputs& x) {
         const Tensor tr = x[0].t(), sl = x[0].slice(0, 0, 6, 2);
         return cat({add(mul(tr, x[1].expand({4, 6})), tr).reshape({-1}), sub(sl, sl.slice(0, 1, 2)).reshape({-1})});
       }});
  t.push_back({"where_float64_transposed_condition",
               [](Generator& g) {
                 return Inputs{randn({3, 4}, {.dtype = DType::Float64}, &g),
                               randn({4, 3}, {.dtype = DType::Float64}, &g),
                               randn({4, 3}, {.dtype = DType::Float64}, &g)};
               },
               [](const Inputs& x) { return where(gt(x[0], 0.0).t(), x[1], x[2]); },
               2e-4,
               true,
               true,
               true,
               {0}});
}

void add_inplace_gradcheck_rows(std::vector<OpRow>& t) {
  // Finite differences through in-place ops on a non-leaf: add_/sub_ with alpha, mul_ and div_
  // (then used with the input again), scalar add_ and mul_ then neg_, an in-place op whose only
  // differentiable operand is the other one, masked_fill_, and neg_, clamp_ and relu_ in a row.
  const std::vector<std::pair<const char*, std::function<Tensor(const Inputs&)>>> inplace = {
      {"add_alpha",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         return y.add_(x[1], -1.5);
       }},
      {"sub_alpha",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         return y.sub_(x[1], 0.5);
       }},
      {"mul",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         y.mul_(x[1]);
         return mul(y, x[0]);
       }},
      {"div",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         y.div_(x[1]);
         return mul(y, x[0]);
       }},
      {"scalars_then_neg",
       [](const Inputs& x) {
         Tensor y = add(x[0], 0.0);
         y.add_(2.0).mul_(3.0);
         return neg_(y);
       }},
      {"into_a_tensor_without_history",
       [](const Inputs& x) {
         Tensor y = x[2].clone();
         return y.mul_(x[1]);
       }},
      {"masked_fill",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         return masked_fill_(y, gt(x[2].select(1, 0).unsqueeze(1), 0.0), 0.5);
       }},
      {"neg_clamp_relu",
       [](const Inputs& x) {
         Tensor y = mul(x[0], 1.0);
         neg_(y);
         clamp_(y, -0.5, std::nullopt);
         return mul(relu_(y), x[0]);
       }},
  };
  for (const auto& [name, f] : inplace)
    t.push_back({std::string("gradcheck_inplace_") + name,
                 [](Generator& g) {
                   return Inputs{rn(g, {3, 4}), uniform(g, {4}, 0.5, 2.0), rn(g, {3, 4})};
                 },
                 f,
                 2e-4,
                 true,
                 true,
                 true,
                 {2}});
}

// The per-op checks tests/core's elementwise and activation tests made against references: the
// vectorised contiguous path against the strided one (the same bits), float32 arithmetic
// correctly rounded, the float32 backward kernels against float64, and finite differences of
// every op with its attributes, plain, through views, with broadcasting and through in-place ops.
void add_elementwise_core_rows(std::vector<OpRow>& t) {
  add_strided_and_rounding_rows(t);
  add_unary_backward_gradcheck_rows(t);
  add_binary_view_gradcheck_rows(t);
  add_where_gradcheck_rows(t);
  add_inplace_gradcheck_rows(t);
}

}  // namespace

namespace {

void add_binary_arithmetic_rows(std::vector<OpRow>& t) {
  auto binary = [&](const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    // Broadcasting [7, 1, 33] with [5, 33], odd sizes on purpose; and the same op on empty operands.
    t.push_back({name,
                 [](Generator& g) {
                   return Inputs{rn(g, {7, 1, 33}), pos(g, {5, 33})};
                 },
                 [f](const Inputs& x) { return f(x[0], x[1]); }});
    t.push_back({name + "_empty",
                 [](Generator& g) {
                   return Inputs{rn(g, {0, 5}), pos(g, {5})};
                 },
                 [f](const Inputs& x) { return f(x[0], x[1]); }});
  };
  binary("add", [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); });
  binary("sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); });
  binary("mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); });
  binary("div", [](const Tensor& a, const Tensor& b) { return div(a, b); });
  binary("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  binary("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); });
  binary("pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a) + 0.1, b); });
  t.push_back({"add_scalar_int64",
               [](Generator& g) {
                 return Inputs{ints(g, -50, 50, {9, 31})};
               },
               [](const Inputs& x) { return add(mul(x[0], 3.0), 7.0); }, 0.0});
}

void add_unary_activation_rows(std::vector<OpRow>& t) {
  auto unary = [&](const std::string& name, std::function<Tensor(const Tensor&)> f, bool positive = false) {
    t.push_back({name,
                 [positive](Generator& g) {
                   return Inputs{positive ? pos(g, {37, 53}) : rn(g, {37, 53})};
                 },
                 [f](const Inputs& x) { return f(x[0]); }});
  };
  unary("neg", [](const Tensor& a) { return neg(a); });
  unary("abs", [](const Tensor& a) { return abs(a); });
  unary("sign", [](const Tensor& a) { return sign(a); });
  unary("square", [](const Tensor& a) { return square(a); });
  unary("exp", [](const Tensor& a) { return exp(a); });
  unary(
      "log", [](const Tensor& a) { return log(a); }, true);
  unary(
      "log1p", [](const Tensor& a) { return log1p(a); }, true);
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
  unary("hardtanh", [](const Tensor& a) { return hardtanh(a, -0.5, 0.7); });
  t.push_back(
      {"relu_odd_1d", [](Generator& g) { return Inputs{rn(g, {1027})}; }, [](const Inputs& x) { return relu(x[0]); }});
}

void add_compare_logical_where_rows(std::vector<OpRow>& t) {
  auto compare = [&](const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> f) {
    t.push_back({name,
                 [](Generator& g) {
                   return Inputs{tricky(g, {7, 1, 33}), tricky(g, {5, 33})};
                 },
                 [f](const Inputs& x) { return f(x[0], x[1]); }, 0.0, false, false});
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
                 return Inputs{ints(g, -2, 3, {7, 1, 33}), ints(g, -2, 3, {5, 33})};
               },
               [](const Inputs& x) { return eq(x[0], x[1]); }, 0.0});
  // allclose reduces isclose's mask: both the true and the false answer.
  t.push_back({"isclose_allclose",
               [](Generator& g) {
                 return Inputs{rn(g, {9, 40})};
               },
               [](const Inputs& x) {
                 const Tensor y = add(x[0], 1e-7);
                 return tensor({allclose(x[0], y) ? 1.0 : 0.0, allclose(x[0], add(y, 1e-2)) ? 1.0 : 0.0});
               },
               0.0, false, false});

  auto masks = [](Generator& g) { return Inputs{ints(g, 0, 2, {7, 1, 33}), ints(g, 0, 2, {5, 33})}; };
  t.push_back({"logical_and", masks, [](const Inputs& x) { return logical_and(x[0], x[1]); }, 0.0});
  t.push_back({"logical_or", masks, [](const Inputs& x) { return logical_or(x[0], x[1]); }, 0.0});
  t.push_back({"logical_not", masks, [](const Inputs& x) { return logical_not(x[1]); }, 0.0});
  t.push_back({"where",
               [](Generator& g) {
                 return Inputs{ints(g, 0, 2, {7, 1, 33}), rn(g, {7, 5, 33}), rn(g, {5, 33})};
               },
               [](const Inputs& x) { return where(ne(x[0], 0), x[1], x[2]); }, 1e-6});
  t.push_back({"where_scalar_side",
               [](Generator& g) {
                 return Inputs{rn(g, {37, 53})};
               },
               [](const Inputs& x) { return where(gt(x[0], 0.2), x[0], zeros({}, x[0].options())); }, 0.0});
}

void add_cast_copy_fill_random_rows(std::vector<OpRow>& t) {
  // Casts: every dtype through a strided view and back (copy_stub's dtype conversion).
  for (DType dt :
       {DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool, DType::Float16, DType::BFloat16}) {
    t.push_back({std::string("cast_to_") + dtype_name(dt),
                 [](Generator& g) {
                   return Inputs{mul(rn(g, {5, 7, 3}), 40.0)};
                 },
                 [dt](const Inputs& x) { return x[0].transpose(0, 2).to(dt).to(DType::Float64); },
                 0.0,
                 false,
                 false,
                 true,
                 {},
                 [dt](const Inputs& x) {
                   std::vector<double> v;
                   for (double e : element_values(x[0].transpose(0, 2)))
                     v.push_back(converted(converted(e, dt), DType::Float64));
                   return from_vector<double>(v, x[0].transpose(0, 2).shape());
                 }});
  }
  t.push_back({"copy_strided_to_contiguous",
               [](Generator& g) {
                 return Inputs{rn(g, {6, 5, 4})};
               },
               [](const Inputs& x) {
                 return x[0].permute({2, 0, 1}).contiguous();
               },
               0.0});
  t.push_back({"fill_full_and_zeros",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4})};
               },
               [](const Inputs& x) {
                 Tensor a = full({17, 3}, 2.5, x[0].options());
                 Tensor z = zeros({17, 3}, x[0].options());
                 return add(a, z);
               },
               0.0, false, false});
  // Random fills: the two backends need not draw the same numbers, so the rows compare moments.
  t.push_back({"rand_randn_moments", [](Generator& g) { return Inputs{rn(g, {1})}; },
               [](const Inputs& x) {
                 Generator gen(77);
                 const Tensor u = rand({20000}, x[0].options(), &gen), n = randn({20000}, x[0].options(), &gen);
                 return stack({mean(u), var(u), mean(n), var(n)}).detach();
               },
               0.0, false, false, false});
  // Moments of 20,000 draws, which are not the same draws in float32 and float64: within 0.05 of the
  // reference's (the standard error of the normal mean is 0.007, of the variances about 0.01).
  t.back().atol = 0.05;
}

}  // namespace

void add_elementwise_rows(std::vector<OpRow>& t) {
  add_binary_arithmetic_rows(t);
  add_unary_activation_rows(t);
  add_compare_logical_where_rows(t);
  add_cast_copy_fill_random_rows(t);
  add_elementwise_core_rows(t);
}

}  // namespace ember::ops_test
