// Linear, Identity, the activation layers, Flatten/Unflatten and nn::functional::linear: values
// against hand-computed results, gradchecks through the module API in float64, PyTorch's
// parameter names and default initialisation bounds, errors; and a small MLP that learns.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/gradcheck.h"
#include "layers/nn.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {
void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}
// Gradcheck of a module: input x plus every parameter, all float64.
void gradcheck_module(nn::Module& m, const Tensor& x) {
  m.to(DType::Float64);
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return m(in[0]); }, inputs);
  EXPECT_TRUE(r.ok) << m.type_name() << ": " << r.message;
}
Tensor rand64(Shape s, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(s), {.dtype = DType::Float64, .requires_grad = true}, &g);
}
}  // namespace

TEST(Linear, HandValuesAndNames) {
  nn::Linear fc(2, 2);
  EXPECT_EQ(fc.named_parameters()[0].first, "weight");
  EXPECT_EQ(fc.named_parameters()[1].first, "bias");
  EXPECT_EQ(fc.weight.shape(), (Shape{2, 2}));
  {
    NoGradGuard ng;
    fc.weight.copy_(tensor({{1, 2}, {3, 4}}));
    fc.bias.copy_(tensor({1, -1}));
  }
  EXPECT_EQ(vec(fc(tensor({{1, 1}, {0, 1}}))), (std::vector<double>{4, 6, 3, 3}));
  // 1-D and 3-D inputs.
  EXPECT_EQ(vec(fc(tensor({1, 1}))), (std::vector<double>{4, 6}));
  Tensor y3 = fc(ones({2, 3, 2}));
  EXPECT_EQ(y3.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vec(y3)[5], 6.0);
  EXPECT_EQ(fc.extra_repr(), "in_features=2, out_features=2, bias=true");
  nn::Linear nb(3, 1, {.bias = false});
  EXPECT_EQ(nb.parameters().size(), 1u);
  EXPECT_EQ(nb.named_parameters()[0].first, "weight");
}

TEST(Linear, DefaultInitBounds) {
  nn::Linear fc(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  double wmax = 0, bmax = 0;
  for (double v : vec(fc.weight)) wmax = std::max(wmax, std::abs(v));
  for (double v : vec(fc.bias)) bmax = std::max(bmax, std::abs(v));
  EXPECT_LE(wmax, bound);
  EXPECT_GT(wmax, 0.98 * bound);
  EXPECT_LE(bmax, bound);
  EXPECT_GT(bmax, 0.9 * bound);
  Generator g1(5), g2(5);
  nn::Linear a(4, 3), b(4, 3);
  a.reset_parameters(&g1);
  b.reset_parameters(&g2);
  EXPECT_EQ(vec(a.weight), vec(b.weight));
}

TEST(Linear, Gradcheck) {
  nn::Linear fc(3, 4);
  gradcheck_module(fc, rand64({5, 3}, 1));
  nn::Linear fc3(3, 2, {.bias = false});
  gradcheck_module(fc3, rand64({2, 2, 3}, 2));
  nn::Linear fc1(3, 2);
  gradcheck_module(fc1, rand64({3}, 3));
}

// The weight enters the product as weight.t(); its gradient must still reach the parameter
// contiguous (accumulating a transposed one over micro-batches was a strided add per element),
// for 2-D inputs (addmm, mm) and inputs with more dims (folded into one product), and equal the
// hand value.
TEST(Linear, WeightGradientReachesTheParameterContiguous) {
  for (bool bias : {true, false})
    for (const Shape& in : {Shape{5, 3}, Shape{2, 5, 3}}) {
      manual_seed(4);
      nn::Linear lin(3, 4, {.bias = bias});
      std::vector<bool> contiguous;
      lin.weight.register_hook([&](const Tensor& g) {
        contiguous.push_back(g.is_contiguous());
        return Tensor();
      });
      Generator gen(5);
      Tensor x = randn(in, {}, &gen);
      for (int pass = 0; pass < 2; ++pass) sum(lin(x)).backward();
      EXPECT_EQ(contiguous, (std::vector<bool>{true, true})) << (bias ? "addmm" : "mm") << " " << shape_str(in);
      // d sum(x W^T) / dW = 1^T x per pass, summed over the rows (and leading dims) of x.
      const Tensor want = mul(sum(x.reshape({-1, 3}), {0}).unsqueeze(0).expand({4, 3}), 2.0);
      EXPECT_LT(max(abs(sub(lin.weight.grad(), want))).item(), 1e-5) << shape_str(in);
    }
}

TEST(Linear, Errors) {
  nn::Linear fc(3, 4);
  std::string e = error_of([&] { fc(ones({2, 5})); });
  EXPECT_TRUE(has(e, "linear")) << e;
  EXPECT_TRUE(has(e, "5 features")) << e;
  EXPECT_THROW(nn::Linear(-1, 2), Error);
  EXPECT_THROW(nn::F::linear(ones({2, 3}), ones({3}), Tensor()), Error);
  EXPECT_THROW(nn::F::linear(ones({2, 3}), ones({4, 3}), ones({3})), Error);
}

TEST(Activations, HandValues) {
  Tensor x = tensor({-1.0, 0.0, 2.0});
  EXPECT_EQ(vec(nn::ReLU()(x)), (std::vector<double>{0, 0, 2}));
  expect_near(vec(nn::LeakyReLU(0.1)(x)), {-0.1, 0, 2}, 1e-7);
  expect_near(vec(nn::ELU()(x)), {std::exp(-1.0) - 1, 0, 2}, 1e-6);
  expect_near(vec(nn::GELU()(tensor({0.0, 1.0}))), {0.0, 0.8413447}, 1e-6);
  expect_near(vec(nn::GELU("tanh")(tensor({1.0}))), {0.8411920}, 1e-6);
  expect_near(vec(nn::Sigmoid()(tensor({0.0}))), {0.5}, 1e-7);
  expect_near(vec(nn::Tanh()(tensor({1.0}))), {std::tanh(1.0)}, 1e-6);
  Tensor z = tensor({{0.0, std::log(3.0)}});
  expect_near(vec(nn::Softmax(1)(z)), {0.25, 0.75}, 1e-6);
  expect_near(vec(nn::LogSoftmax(-1)(z)), {std::log(0.25), std::log(0.75)}, 1e-6);
  EXPECT_THROW(nn::GELU("fast"), Error);
  EXPECT_EQ(nn::LeakyReLU(0.2).extra_repr(), "negative_slope=0.2");
}

TEST(Activations, GradcheckThroughModules) {
  Tensor x = rand64({3, 4}, 7);
  nn::LeakyReLU lr(0.2);
  gradcheck_module(lr, x);
  nn::ELU elu(0.7);
  gradcheck_module(elu, x);
  nn::GELU gelu;
  gradcheck_module(gelu, x);
  nn::Sigmoid sig;
  gradcheck_module(sig, x);
  nn::Tanh th;
  gradcheck_module(th, x);
  nn::Softmax sm(1);
  gradcheck_module(sm, x);
  nn::LogSoftmax lsm(0);
  gradcheck_module(lsm, x);
}

TEST(Shape, FlattenUnflatten) {
  Tensor x = arange(24.0, {.dtype = DType::Float32}).view({2, 3, 4});
  nn::Flatten f;
  EXPECT_EQ(f(x).shape(), (Shape{2, 12}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 4}));
  nn::Unflatten u(1, {3, 4});
  EXPECT_EQ(u(f(x)).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(vec(u(f(x))), vec(x));
  EXPECT_EQ(nn::Unflatten(1, {-1, 2})(f(x)).shape(), (Shape{2, 6, 2}));
  EXPECT_THROW(nn::Unflatten(1, {5, 5})(f(x)), Error);
}

TEST(Training, MlpLearnsWithAdamAndOneCycle) {
  manual_seed(0);
  nn::Sequential net(nn::make<nn::Linear>(8, 32), nn::make<nn::ReLU>(), nn::make<nn::Linear>(32, 1));
  EXPECT_EQ(net.named_parameters()[2].first, "2.weight");
  Generator g(3);
  Tensor x = randn({64, 8}, {}, &g);
  Tensor w_true = randn({8, 1}, {}, &g);
  Tensor y = matmul(x, w_true);
  optim::Adam opt(net.parameters(), {.lr = 1e-2});
  optim::OneCycleLR sched(opt, 2e-2, {.total_steps = 60});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = nn::mse_loss(net(x), y);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    nn::utils::clip_grad_norm_(net.parameters(), 10.0);
    opt.step();
    sched.step();
  }
  EXPECT_LT(last, 0.1 * first) << first << " -> " << last;
}
