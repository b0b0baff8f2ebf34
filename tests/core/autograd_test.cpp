// The autograd engine: accumulation, shared subgraphs, retain_graph, detach, no_grad, hooks,
// in-place rules and version errors, grad(), gradcheck itself, and that graphs do not leak.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/node.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {
Tensor f64(std::initializer_list<double> v, bool rg = true) {
  return tensor(v, {.dtype = DType::Float64, .requires_grad = rg});
}
}  // namespace

TEST(Autograd, MulAddBackward) {
  Tensor x = tensor({1, 2, 3}, {.requires_grad = true});
  Tensor y = tensor({4, 5, 6}, {.requires_grad = true});
  (x * y + x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(y.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE((x * y).is_leaf());
  EXPECT_EQ((x * y).grad_fn()->name(), "MulBackward");
}

TEST(Autograd, GradientsAccumulateAcrossBackwards) {
  Tensor x = f64({1, 2});
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{6, 6}));
  x.mutable_grad().zero_();
  (x * 2.0).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{2, 2}));
}

TEST(Autograd, SharedSubgraphSumsBothPaths) {
  Tensor x = f64({2});
  Tensor h = x * x;            // used twice below
  Tensor y = h * h + h * 3.0;  // y = x^4 + 3x^2, dy/dx = 4x^3 + 6x = 44 at 2
  y.sum().backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 44.0);
}

// Gradients that reach one input from several paths are summed in the engine, in place into the
// first one when nothing else holds it. A gradient that someone else does see (a hook kept it, or
// one tensor is the gradient of two inputs, as add's backward returns) must not change under them.
TEST(Autograd, SummingGradientsLeavesTensorsSeenElsewhereAlone) {
  Tensor x = f64({1, 2, 3});
  Tensor a = x * 1.0, b = x * 1.0;
  std::vector<Tensor> seen;
  a.register_hook([&](const Tensor& g) {
    seen.push_back(g);  // keeps a handle on the gradient flowing into a
    return g;
  });
  // a + b: add's backward hands one gradient tensor to both a and b; a * 2 doubles it on one path.
  Tensor y = (a + b) * 2.0 + a * 3.0;
  y.sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{7, 7, 7}));  // 2 + 3 from a, 2 from b
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(vec(seen[0]), (std::vector<double>{5, 5, 5}));  // still what the hook was given
  // A leaf used on many paths, whose partial gradients are fresh tensors: summed exactly.
  Tensor w = f64({2, 4});
  Tensor z = w * 1.0 + w * 2.0 + w * 3.0 + w.exp();
  z.sum().backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<double>{6 + std::exp(2.0), 6 + std::exp(4.0)}));
}

TEST(Autograd, DiamondRunsEachNodeOnce) {
  // x -> a -> (b, c) -> d: a's backward must run once, after both b and c delivered.
  Tensor x = f64({1.5});
  Tensor a = x * 2.0;
  int calls = 0;
  a.register_hook([&](const Tensor& g) {
    ++calls;
    EXPECT_DOUBLE_EQ(g.item(), 5.0);  // 2 (from b) + 3 (from c)
    return Tensor();
  });
  Tensor d = a * 2.0 + a * 3.0;
  d.sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(x.grad().item(), 10.0);
}

TEST(Autograd, RetainGraph) {
  Tensor x = f64({3});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 12.0);
  std::string e = error_of([&] { y.backward(); });
  EXPECT_NE(e.find("retain_graph"), std::string::npos) << e;
}

TEST(Autograd, NonScalarBackwardNeedsGradient) {
  Tensor x = f64({1, 2});
  Tensor y = x * 2.0;
  EXPECT_NE(error_of([&] { y.backward(); }).find("gradient must be given"), std::string::npos);
  EXPECT_NE(error_of([&] { y.backward(f64({1, 1, 1}, false)); }).find("shape"), std::string::npos);
  y.backward(f64({1, 10}, false));
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{2, 20}));
}

TEST(Autograd, BackwardOnTensorWithoutGradIsAnError) {
  Tensor x = f64({1}, false);
  EXPECT_NE(error_of([&] { (x * 2.0).sum().backward(); }).find("does not require grad"), std::string::npos);
}

TEST(Autograd, DetachAndNoGrad) {
  Tensor x = f64({2});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.storage(), x.storage());
  Tensor y = x * d;  // d is a constant: dy/dx = d = 2
  y.sum().backward();
  EXPECT_DOUBLE_EQ(x.grad().item(), 2.0);
  {
    NoGradGuard ng;
    Tensor z = x * 3.0;
    EXPECT_FALSE(z.requires_grad());
    EXPECT_EQ(z.grad_fn(), nullptr);
    EnableGradGuard eg;
    EXPECT_TRUE((x * 3.0).requires_grad());
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(Autograd, RequiresGradOnlyForFloatingLeaves) {
  Tensor x = f64({1});
  Tensor y = x * 2.0;
  EXPECT_NE(error_of([&] { y.requires_grad_(false); }).find("leaf"), std::string::npos);
  x.requires_grad_(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
}

TEST(Autograd, LeafHooksFireOnceAfterAccumulationInOrder) {
  Tensor w1 = f64({1, 2});
  Tensor w2 = f64({3});
  std::vector<std::string> order;
  int fires = 0;
  w1.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    order.push_back("w1");
    ++fires;
    // The hook sees the complete gradient of this backward: both uses of w1 summed.
    EXPECT_EQ(leaf.grad().to_vector<double>(), (std::vector<double>{2 * (3 + 1), 2 * (3 + 1)}));
  });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w2"); });
  Tensor h = w1 * w2;   // layer 1
  Tensor out = h + w1;  // w1 used twice
  Tensor loss = (out * 2.0).sum();
  loss.backward();
  EXPECT_EQ(fires, 1);
  EXPECT_EQ(order.size(), 2u);
  EXPECT_DOUBLE_EQ(w2.grad().item(), 2 * (1 + 2));
}

TEST(Autograd, LaterLayersGradientsAreReadyFirst) {
  // The data-parallel reducer relies on gradients of late layers arriving before early ones.
  Tensor w1 = f64({1}), w2 = f64({1}), w3 = f64({1});
  std::vector<int> order;
  w1.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(1); });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(2); });
  w3.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(3); });
  Tensor x = f64({2}, false);
  Tensor h = x * w1;
  h = h * w2;
  h = h * w3;
  h.sum().backward();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Autograd, PreHookCanReplaceGradient) {
  Tensor x = f64({1, 1});
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  (x * 2.0).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{20, 20}));
  Tensor y = f64({1});
  Tensor h = y * 3.0;
  h.register_hook([](const Tensor& g) { return g * 0.0; });
  (h * 5.0).sum().backward();
  EXPECT_DOUBLE_EQ(y.grad().item(), 0.0);
}

TEST(Autograd, RetainGradOnNonLeaf) {
  Tensor x = f64({2});
  Tensor h = x * 3.0;
  h.retain_grad();
  (h * h).sum().backward();
  EXPECT_DOUBLE_EQ(h.grad().item(), 12.0);
  EXPECT_FALSE((x * 1.0).retains_grad());
}

TEST(Autograd, InplaceOnSavedTensorIsAnError) {
  Tensor x = f64({1, 2});
  Tensor h = x * 1.0;
  Tensor y = h * h;  // saves h
  h.add_(1.0);
  std::string e = error_of([&] { y.sum().backward(); });
  EXPECT_NE(e.find("modified by an in-place operation"), std::string::npos) << e;
}

TEST(Autograd, InplaceOnLeafRequiringGradIsAnError) {
  Tensor x = f64({1});
  EXPECT_NE(error_of([&] { x.add_(1.0); }).find("leaf"), std::string::npos);
  {
    NoGradGuard ng;  // parameter updates are allowed under no_grad
    x.add_(1.0);
  }
  EXPECT_DOUBLE_EQ(x.item(), 2.0);
}

TEST(Autograd, InplaceOnNonLeafRewritesHistory) {
  Tensor x = f64({1, 2});
  Tensor h = x * 2.0;
  h.mul_(f64({3, 4}, false));  // h = 2x * c
  h.add_(x);                   // h = 2xc + x
  h.sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{7, 9}));
}

TEST(Autograd, InplaceOnViewWithHistoryIsRefused) {
  Tensor x = f64({1, 2, 3});
  Tensor h = x * 1.0;
  EXPECT_NE(error_of([&] { h.slice(0, 0, 1).mul_(f64({2}, false)); }).find("view"), std::string::npos);
  Tensor buf = zeros({3}, {.dtype = DType::Float64});
  EXPECT_NE(error_of([&] { buf.slice(0, 0, 2).copy_(x.slice(0, 0, 2)); }).find("view"), std::string::npos);
}

TEST(Autograd, CopyIntoTensorPropagatesGradient) {
  Tensor x = f64({1, 2});
  Tensor buf = zeros({2, 2}, {.dtype = DType::Float64});
  buf.copy_(x);  // broadcast copy: grad of x sums over the broadcast dim
  (buf * 3.0).sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{6, 6}));
}

TEST(Autograd, GradFunctionDoesNotTouchDotGrad) {
  Tensor x = f64({3});
  Tensor y = (x * x * x).sum();
  auto g = autograd::grad({y}, {x});
  EXPECT_DOUBLE_EQ(g[0].item(), 27.0);
  EXPECT_FALSE(x.grad().defined());
  Tensor unused = f64({1});
  Tensor z = (x * 2.0).sum();
  EXPECT_NE(error_of([&] { autograd::grad({z}, {unused}); }).find("allow_unused"), std::string::npos);
}

TEST(Autograd, GradcheckCatchesAWrongGradient) {
  // A deliberately wrong backward (2x instead of the right gradient) must be reported.
  auto bad_square = [](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    Tensor out;
    {
      NoGradGuard ng;
      out = x * x;
    }
    autograd::SavedTensor sx(x);
    autograd::record("BadSquare", {x}, {out}, [sx](const std::vector<Tensor>& g, const std::vector<bool>&) {
      return std::vector<Tensor>{g[0] * sx.get() * 3.0};
    });
    return out;
  };
  Tensor x = randn({4}, {.dtype = DType::Float64, .requires_grad = true});
  GradcheckResult r = gradcheck(bad_square, {x});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 0"), std::string::npos) << r.message;
}

TEST(Autograd, GradcheckBroadcastAndViews) {
  Tensor a = randn({3, 4}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor b = (rand({4}, {.dtype = DType::Float64}) + 1.0).detach().requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return in[0] / in[1] * in[0] - in[1]; }, {a, b});
  EXPECT_TRUE(r.ok) << r.message;
  auto r2 = gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor v = in[0].t().slice(0, 1, 3).reshape({2, 3});
        return v * in[0].select(1, 2).unsqueeze(0).expand({2, 3}) +
               in[0].permute({1, 0}).narrow(0, 0, 2).flatten().view({2, 3});
      },
      {a});
  EXPECT_TRUE(r2.ok) << r2.message;
  auto r3 = gradcheck(
      [](const std::vector<Tensor>& in) { return in[0].sum({0}) * in[0].mean({1}, true).squeeze().sum(); }, {a});
  EXPECT_TRUE(r3.ok) << r3.message;
  auto r4 = gradcheck([](const std::vector<Tensor>& in) { return in[0].clone() * in[0].contiguous(); }, {a});
  EXPECT_TRUE(r4.ok) << r4.message;
}

TEST(Autograd, CastsCarryGradientsBackToTheSourceDtype) {
  Tensor x = f64({1.5, 2});
  Tensor y = x.to(DType::Float32) * 2.0;
  y.sum().backward();
  EXPECT_EQ(x.grad().dtype(), DType::Float64);
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{2, 2}));
}

TEST(Autograd, ThousandIterationsDoNotGrowMemory) {
  Tensor w = randn({64, 32}, {.requires_grad = true});
  Tensor b = zeros({32}, {.requires_grad = true});
  Tensor x = randn({64, 32});
  auto step = [&] {
    Tensor h = x * w + b;
    Tensor loss = (h * h).mean();
    loss.backward();
    NoGradGuard ng;
    w.sub_(w.grad() * 0.01);
    b.sub_(b.grad() * 0.01);
    w.mutable_grad().zero_();
    b.mutable_grad().zero_();
  };
  for (int i = 0; i < 10; ++i) step();
  const int64_t before = cpu_allocator()->stats().in_use;
  for (int i = 0; i < 1000; ++i) step();
  EXPECT_EQ(cpu_allocator()->stats().in_use, before);
}

TEST(Autograd, GraphIsFreedWithItsOutput) {
  // No reference cycles: once the output and its graph are gone, saved tensors are freed.
  Tensor x = randn({1000}, {.requires_grad = true});
  const int64_t before = cpu_allocator()->stats().in_use;
  {
    Tensor y = x * x;  // saves x (shared) and allocates y
    Tensor z = y * y;  // saves y
    EXPECT_GT(cpu_allocator()->stats().in_use, before);
  }
  EXPECT_EQ(cpu_allocator()->stats().in_use, before);
}
