// Rows: the elementwise families in every dtype their kernels take, each through every operand
// layout the kernels treat differently (contiguous with a vector tail, shorter than a vector,
// misaligned by one element, broadcast, a one-element operand, transposed); index_select in five
// dtypes along every dim; every dtype conversion; and the random fills, which draw the same
// stream from the same generator on every backend, per dtype (core/elementwise_kernels.h,
// core/index_kernels.h, core/copy.h, core/random.h). These rows took over tests/emu's
// elementwise, cast, index_select and random checks.
#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "op_table.h"
#include "oracle.h"

namespace ember::ops_test {
namespace {

// The values v (each already a value of dtype `from`, or converted to it first) converted to `to`,
// by the definitions in oracle.h: the oracle of the cast rows.
Tensor cast_oracle(const std::vector<double>& v, DType from, DType to) {
  std::vector<double> d;
  std::vector<int64_t> i;
  for (double x : v) {
    const double f = converted(x, from);
    if (is_floating(to))
      d.push_back(converted(f, to));
    else
      i.push_back(converted_int(f, to));
  }
  const Shape s = {static_cast<int64_t>(v.size())};
  return is_floating(to) ? from_vector<double>(d, s) : from_vector<int64_t>(i, s);
}

// Values in [lo, hi] in dtype dt (integers for integer dtypes).
Tensor sample(Generator& g, Shape s, DType dt, double lo, double hi) {
  if (is_floating(dt)) return add(mul(rand(std::move(s), {.dtype = DType::Float64}, &g), hi - lo), lo).to(dt);
  return randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi) + 1, std::move(s), {.dtype = dt}, &g);
}

// An operand layout: the stored shapes of the two inputs and how the row views the first.
struct Layout {
  const char* name;
  Shape a, b;
  enum View { Plain, Misaligned, Transposed } view = Plain;
};
// Sizes are no multiple of the block (256) or of any vector width (2..16 elements).
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> v = {
      {"tail", {4099}, {4099}},
      {"small", {7}, {7}},
      {"misaligned", {1002}, {1001}, Layout::Misaligned},  // a starts one element into its buffer
      {"broadcast", {5, 1, 13}, {1, 6, 13}},
      {"scalar_operand", {3, 33}, {1}},
      {"transposed", {9, 17}, {17, 9}, Layout::Transposed},  // a is the transpose of a contiguous tensor
  };
  return v;
}
Tensor view_a(const Tensor& a, const Layout& l) {
  if (l.view == Layout::Misaligned) return a.narrow(0, 1, a.size(0) - 1);
  if (l.view == Layout::Transposed) return a.t();
  return a;
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                       DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  return v;
}

const std::vector<DType> kArithmetic = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8};

std::string lower_name(DType dt) {
  return dtype_name(dt);
}

}  // namespace

namespace {

void add_binary_dtype_rows(std::vector<OpRow>& t) {
  // Binary arithmetic: every op, dtype and layout (division of integers is a float division, which
  // the integer rows of the other ops already reach through their casts: floating dtypes only).
  struct Binary {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
    bool floating_only;
  };
  const std::vector<Binary> binaries = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, false},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, true},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, false},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, false},
  };
  for (DType dt : kArithmetic) {
    const bool fp = is_floating(dt);
    for (const Binary& op : binaries) {
      if (op.floating_only && !fp) continue;
      const bool is_pow = std::string(op.name) == "pow", is_div = std::string(op.name) == "div";
      const double lo = is_pow ? (fp ? 0.1 : 0.0) : (dt == DType::UInt8 ? 0.0 : -3.0), hi = is_pow ? 3.0 : 9.0;
      for (const Layout& l : layouts()) {
        OpRow r{std::string(op.name) + "_" + lower_name(dt) + "_" + l.name,
                [dt, lo, hi, is_div, l](Generator& g) {
                  return Inputs{sample(g, l.a, dt, lo, hi), sample(g, l.b, dt, is_div ? 0.5 : lo, hi)};
                },
                [f = op.f, l](const Inputs& x) { return f(view_a(x[0], l), x[1]); }, fp ? 2e-4 : 0.0};
        r.gradcheck = false;  // the small float32 rows check the derivatives
        t.push_back(std::move(r));
      }
    }
    // alpha != 1 on add and sub.
    for (bool is_add : {true, false}) {
      OpRow r{std::string(is_add ? "add" : "sub") + "_alpha2_" + lower_name(dt),
              [dt](Generator& g) {
                return Inputs{sample(g, {4099}, dt, 0, 9), sample(g, {4099}, dt, 0, 9)};
              },
              [is_add](const Inputs& x) { return is_add ? add(x[0], x[1], 2.0) : sub(x[0], x[1], 2.0); },
              fp ? 2e-4 : 0.0};
      r.gradcheck = false;
      t.push_back(std::move(r));
    }
  }
  // A binary op writing into one of its own operands.
  for (DType dt : {DType::Float32, DType::Int64}) {
    OpRow r{std::string("mul_inplace_aliasing_") + lower_name(dt),
            [dt](Generator& g) {
              return Inputs{sample(g, {1003}, dt, -3, 3), sample(g, {1003}, dt, -3, 3)};
            },
            [](const Inputs& x) {
              Tensor y = x[0].detach().clone();
              y.mul_(x[1].detach());
              return y;
            },
            is_floating(dt) ? 2e-4 : 0.0,
            false,
            false};
    t.push_back(std::move(r));
  }
  // Ties between the operands of maximum and minimum: the gradient goes half to each.
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (bool is_max : {true, false}) {
      OpRow r{std::string(is_max ? "maximum" : "minimum") + "_ties_" + lower_name(dt),
              [dt](Generator& g) {
                return Inputs{mul(randint(-2, 3, {5, 1, 13}, {.dtype = dt}, &g), 0.5),
                              mul(randint(-2, 3, {1, 6, 13}, {.dtype = dt}, &g), 0.5)};
              },
              [is_max](const Inputs& x) { return is_max ? maximum(x[0], x[1]) : minimum(x[0], x[1]); }};
      r.gradcheck = false;
      t.push_back(std::move(r));
    }
  }
}

void add_unary_activation_dtype_rows(std::vector<OpRow>& t) {
  // Unary ops (and their backward through the gradient kernels), integers where the op takes them.
  struct Unary {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    double lo, hi;
    bool ints;
  };
  const std::vector<Unary> unaries = {
      {"neg", [](const Tensor& a) { return neg(a); }, -3, 3, true},
      {"abs", [](const Tensor& a) { return abs(a); }, -3, 3, true},
      {"sign", [](const Tensor& a) { return sign(a); }, -3, 3, true},
      {"square", [](const Tensor& a) { return square(a); }, -3, 3, true},
      {"clamp", [](const Tensor& a) { return clamp(a, -1.0, 2.0); }, -3, 3, true},
      {"pow3", [](const Tensor& a) { return pow(a, 3.0); }, -3, 3, true},
      {"pow_half", [](const Tensor& a) { return pow(a, 0.5); }, 0.1, 3, false},
      {"pow_minus2", [](const Tensor& a) { return pow(a, -2.0); }, 0.1, 3, false},
      {"pow_1_7", [](const Tensor& a) { return pow(a, 1.7); }, 0.1, 3, false},
      {"exp", [](const Tensor& a) { return exp(a); }, -3, 3, false},
      {"log", [](const Tensor& a) { return log(a); }, 0.1, 5, false},
      {"log1p", [](const Tensor& a) { return log1p(a); }, -0.5, 5, false},
      {"sqrt", [](const Tensor& a) { return sqrt(a); }, 0.1, 5, false},
      {"rsqrt", [](const Tensor& a) { return rsqrt(a); }, 0.1, 5, false},
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const bool fp = is_floating(dt);
    for (const Unary& op : unaries) {
      if (!fp && !op.ints) continue;
      for (const Layout& l : {layouts()[0], layouts()[2], layouts()[5]}) {
        OpRow r{std::string(op.name) + "_" + lower_name(dt) + "_" + l.name,
                [dt, lo = op.lo, hi = op.hi, l](Generator& g) { return Inputs{sample(g, l.a, dt, lo, hi)}; },
                [f = op.f, l](const Inputs& x) { return f(view_a(x[0], l)); }, fp ? 2e-4 : 0.0};
        r.gradcheck = false;
        t.push_back(std::move(r));
      }
    }
  }

  // Activations with their attributes, forward and backward, contiguous with a tail and broadcast
  // (a stride-0 input); and relu on integers.
  struct Activation {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
  };
  const std::vector<Activation> activations = {
      {"relu", [](const Tensor& a) { return relu(a); }},
      {"leaky_relu", [](const Tensor& a) { return leaky_relu(a, 0.1); }},
      {"elu_alpha1_5", [](const Tensor& a) { return elu(a, 1.5); }},
      {"gelu", [](const Tensor& a) { return gelu(a); }},
      {"gelu_tanh", [](const Tensor& a) { return gelu(a, true); }},
      {"sigmoid", [](const Tensor& a) { return sigmoid(a); }},
      {"tanh", [](const Tensor& a) { return tanh(a); }},
      {"softplus_beta2_threshold3", [](const Tensor& a) { return softplus(a, 2.0, 3.0); }},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Activation& op : activations) {
      OpRow tail{std::string(op.name) + "_" + lower_name(dt) + "_tail",
                 [dt](Generator& g) { return Inputs{sample(g, {4099}, dt, -4, 4)}; },
                 [f = op.f](const Inputs& x) { return f(x[0]); }};
      tail.gradcheck = false;
      t.push_back(std::move(tail));
      // The small broadcast row keeps finite differences: the attributes are new here.
      t.push_back({std::string(op.name) + "_" + lower_name(dt) + "_broadcast",
                   [dt](Generator& g) {
                     return Inputs{sample(g, {5, 1, 13}, dt, -4, 4)};
                   },
                   [f = op.f](const Inputs& x) {
                     return f(x[0].expand({5, 6, 13}));
                   }});
    }
  }
  t.push_back({"relu_int32", [](Generator& g) { return Inputs{sample(g, {300}, DType::Int32, -3, 3)}; },
               [](const Inputs& x) { return relu(x[0]); }, 0.0});
}

void add_index_select_dtype_rows(std::vector<OpRow>& t) {
  // index_select along every dim in five dtypes (values exact in each); floating ones also take
  // the gradient (index_add with repeated indices).
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Float16, DType::UInt8}) {
    for (int64_t dim : {0, 1, 2}) {
      const Shape src = {4, 9, 5};
      OpRow r{std::string("index_select_") + lower_name(dt) + "_dim" + std::to_string(dim),
              [dt, dim, src](Generator& g) {
                return Inputs{randint(0, 100, src, {.dtype = dt}, &g), ints(g, 0, src[static_cast<size_t>(dim)], {13})};
              },
              [dim](const Inputs& x) { return index_select(x[0], dim, x[1]); }, 0.0};
      r.grad = dt == DType::Float32 || dt == DType::Float64;
      r.gradcheck = false;
      t.push_back(std::move(r));
    }
  }
}

void add_cast_rows(std::vector<OpRow>& t) {
  // Dtype conversions: every (from, to) pair of the eight dtypes on values each of them holds
  // (the harness adds the strided layout); out-of-range floats, infinities and NaN to integers
  // (saturating as on the CPU); float16 and bfloat16 rounding at their edges (subnormals, overflow
  // to infinity, ties, NaN) and back, with the sign of zero shown by 1 / x.
  for (DType from : all_dtypes()) {
    for (DType to : all_dtypes()) {
      t.push_back({std::string("cast_") + lower_name(from) + "_to_" + lower_name(to),
                   [from](Generator& g) {
                     return Inputs{from == DType::Bool
                                       ? randint(0, 2, {23, 11}, {.dtype = DType::Float32}, &g)
                                       : mul(randint(0, 120, {23, 11}, {.dtype = DType::Float32}, &g), 0.5)};
                   },
                   [from, to](const Inputs& x) {
                     // From a contiguous and from a transposed source.
                     const Tensor y = x[0].to(from);
                     return cat({y.to(to).reshape({-1}), y.t().to(to).reshape({-1})}, 0);
                   },
                   0.0,
                   false,
                   false,
                   true,
                   {},
                   [from, to](const Inputs& x) {
                     std::vector<double> v = element_values(x[0]), vt = element_values(x[0].t());
                     v.insert(v.end(), vt.begin(), vt.end());
                     return cast_oracle(v, from, to);
                   }});
    }
  }
  for (DType from : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (DType to : {DType::UInt8, DType::Int32, DType::Int64}) {
      t.push_back(
          {std::string("cast_saturating_") + lower_name(from) + "_to_" + lower_name(to),
           [](Generator&) {
             return Inputs{from_vector<double>(
                 {-3.7, 300.0, -1e30, 1e30, INFINITY, -INFINITY, NAN, 3e9, -3e9, 9.3e18, -9.3e18, 255.5, -0.5}, {13})};
           },
           [from, to](const Inputs& x) { return x[0].to(from).to(to); },
           0.0,
           false,
           false,
           false,
           {},
           [from, to](const Inputs& x) { return cast_oracle(element_values(x[0]), from, to); }});
    }
  }
  for (DType to : {DType::Float16, DType::BFloat16}) {
    t.push_back({std::string("cast_rounding_edges_to_") + lower_name(to),
                 [](Generator&) {
                   std::vector<float> e = {0.0f,      -0.0f,   1.0f,          65504.0f,       65520.0f, 70000.0f,
                                           1e-5f,     6e-8f,   3e-8f,         1e-9f,          -2.5f,    INFINITY,
                                           -INFINITY, NAN,     1.0009765625f, 1.00048828125f, 3.14159f, 1e38f,
                                           -1e-40f,   2049.0f, 2051.0f};
                   for (int i = 0; i < 200; ++i)
                     e.push_back(std::ldexp(1.0f + static_cast<float>(i) / 200.0f, i % 40 - 20));
                   return Inputs{from_vector<float>(e, {static_cast<int64_t>(e.size())})};
                 },
                 [to](const Inputs& x) {
                   const Tensor y = x[0].to(to);
                   const Tensor back = y.to(DType::Float32).to(DType::Float64);
                   return cat({y.to(DType::Float64), back, pow(back, -1.0)}, 0);
                 },
                 0.0,
                 false,
                 false,
                 false,
                 {},
                 [to](const Inputs& x) {
                   std::vector<double> r;
                   for (double v : element_values(x[0])) r.push_back(converted(v, to));
                   std::vector<double> all = r;
                   all.insert(all.end(), r.begin(), r.end());
                   for (double v : r) all.push_back(1.0 / v);
                   return from_vector<double>(all, {static_cast<int64_t>(all.size())});
                 }});
  }
}

void add_random_fill_rows(std::vector<OpRow>& t) {
  // Random fills: one seed and offset give every backend the same numbers (the same Philox
  // stream): bit for bit for the integers and the masks, to rounding for the floats. Odd sizes
  // (element pairs that share a Philox block) and a nonzero offset (a draw before).
  enum class Kind { Uniform, Normal, Bernoulli, RandInt };
  const std::vector<DType>& all = all_dtypes();
  for (Kind kind : {Kind::Uniform, Kind::Normal, Kind::Bernoulli, Kind::RandInt}) {
    for (DType dt : all) {
      if ((kind == Kind::Uniform || kind == Kind::Normal) && !is_floating(dt)) continue;
      if (kind == Kind::RandInt && (dt == DType::UInt8 || dt == DType::Bool)) continue;
      for (int64_t n : {1, 7, 1001}) {
        const char* kn = kind == Kind::Uniform     ? "uniform"
                         : kind == Kind::Normal    ? "normal"
                         : kind == Kind::Bernoulli ? "bernoulli"
                                                   : "randint";
        const bool half = dt == DType::Float16 || dt == DType::BFloat16;
        const double tol = kind == Kind::Bernoulli || kind == Kind::RandInt ? 0.0 : half ? 1e-2 : 1e-5;
        t.push_back({std::string("random_") + kn + "_" + lower_name(dt) + "_n" + std::to_string(n),
                     [](Generator& g) { return Inputs{rn(g, {1})}; },
                     [kind, dt, n](const Inputs& x) {
                       const TensorOptions o{.dtype = dt, .device = x[0].device()};
                       Generator gen(0x1234567890abcdefULL);
                       (void)rand({5}, {.device = x[0].device()}, &gen);  // a nonzero offset
                       Tensor r = empty({n}, o);
                       switch (kind) {
                         case Kind::Uniform:
                           uniform_(r, -2.0, 3.0, &gen);
                           break;
                         case Kind::Normal:
                           normal_(r, 0.5, 2.0, &gen);
                           break;
                         case Kind::Bernoulli:
                           r = bernoulli({n}, 0.3, o, &gen);
                           break;
                         case Kind::RandInt:
                           r = randint(-5, 17, {n}, o, &gen);
                           break;
                       }
                       return r;
                     },
                     tol, false, false, false});
        t.back().cross_reference = true;  // the Philox stream's oracle is the other implementation
      }
    }
  }
  // Bernoulli with a probability per element, and dropout: the same mask on every backend.
  t.push_back({"random_bernoulli_probability_tensor", [](Generator& g) { return Inputs{rand({777}, {}, &g)}; },
               [](const Inputs& x) {
                 Generator gen(42);
                 return bernoulli(x[0].detach().to(DType::Float64), &gen);
               },
               0.0, false, false, false});
  // A uint8 mask from a float64 probability tensor: a dtype pair no op asks of the kernel
  // (bernoulli(p) gives p's dtype).
  t.push_back({"random_bernoulli_kernel_uint8_mask_of_float64_probabilities",
               [](Generator& g) { return Inputs{rand({777}, {.dtype = DType::Float64}, &g)}; },
               [](const Inputs& x) {
                 const RandomParams p{.kind = RandomKind::Bernoulli, .seed = 42, .offset = 3};
                 const Tensor mask = empty({777}, {.dtype = DType::UInt8, .device = x[0].device()});
                 random_stub(mask.device())(mask, p, x[0].detach());
                 return mask;
               },
               0.0, false, false, false});
  for (DType dt : {DType::Float32, DType::Float64}) {
    OpRow r{std::string("dropout_same_mask_") + lower_name(dt),
            [dt](Generator& g) { return Inputs{randn({777}, {.dtype = dt}, &g)}; },
            [](const Inputs& x) {
              Generator gen(42);
              return dropout(x[0], 0.3, true, &gen);
            }};
    r.gradcheck = false;  // a fresh mask per evaluation
    t.push_back(std::move(r));
  }
}

}  // namespace

void add_dtype_rows(std::vector<OpRow>& t) {
  add_binary_dtype_rows(t);
  add_unary_activation_dtype_rows(t);
  add_index_select_dtype_rows(t);
  add_cast_rows(t);
  add_random_fill_rows(t);
}

}  // namespace ember::ops_test
