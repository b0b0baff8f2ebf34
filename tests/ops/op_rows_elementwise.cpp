// Rows: binary and unary elementwise ops, activations, comparisons, logic, selection, casts,
// fills and random fills (core/elementwise_kernels.h, core/copy.h, core/random.h).
#include <cmath>

#include "op_table.h"

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

}  // namespace

void add_elementwise_rows(std::vector<OpRow>& t) {
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

  // Casts: every dtype through a strided view and back (copy_stub's dtype conversion).
  for (DType dt :
       {DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool, DType::Float16, DType::BFloat16}) {
    t.push_back({std::string("cast_to_") + dtype_name(dt),
                 [](Generator& g) {
                   return Inputs{mul(rn(g, {5, 7, 3}), 40.0)};
                 },
                 [dt](const Inputs& x) { return x[0].transpose(0, 2).to(dt).to(DType::Float64); }, 0.0, false, false,
                 true, false});
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
               0.05, false, false, false});
}

}  // namespace ember::ops_test
