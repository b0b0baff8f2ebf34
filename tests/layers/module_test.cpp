// nn::Module: registration rules, recursive parameter and buffer traversal with dotted names,
// train/eval, to(dtype) in place, zero_grad, apply, state_dict round trips and every kind of
// load_state_dict mismatch, forward hooks, summary() and the containers.
#include "layers/module.h"

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops.h"
#include "layers/activation.h"
#include "layers/container.h"
#include "layers/conv.h"
#include "layers/embedding.h"
#include "layers/fusion.h"
#include "layers/pooling.h"
#include "layers/rnn.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// y = x * weight + bias over the last dim: a layer made of ops that exist everywhere.
struct Affine : nn::Module {
  Tensor weight, bias;
  Tensor running;  // a buffer
  explicit Affine(int64_t n, bool with_bias = true) {
    weight = ones({n});
    if (with_bias) bias = zeros({n});
    running = zeros({n});
    register_parameter("weight", &weight);
    register_parameter("bias", &bias);
    register_buffer("running", &running);
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = x * weight;
    return bias.defined() ? y + bias : y;
  }
};

struct Block : nn::Module {
  Affine a{3}, b{3, false};
  Block() { register_modules({{"a", &a}, {"b", &b}}); }
  Tensor forward(const Tensor& x) override { return b(a(x)); }
};

struct Net : nn::Module {
  Block block;
  Affine head{3};
  Net() { register_modules({{"block", &block}, {"head", &head}}); }
  Tensor forward(const Tensor& x) override { return head(block(x)); }
};

std::vector<std::string> names(const nn::NamedTensors& nt) {
  std::vector<std::string> r;
  for (auto& [n, t] : nt) r.push_back(n);
  return r;
}

}  // namespace

// Registration keeps pointers to members, so neither copies nor moves may exist.
static_assert(!std::is_copy_constructible_v<nn::Module> && !std::is_move_constructible_v<nn::Module>);
static_assert(!std::is_copy_assignable_v<nn::Module> && !std::is_move_assignable_v<nn::Module>);
static_assert(!std::is_copy_constructible_v<nn::Sequential> && !std::is_move_constructible_v<nn::Sequential>);

TEST(Module, NamedParametersAreDottedAndInRegistrationOrder) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"block.a.weight", "block.a.bias", "block.b.weight", "head.weight", "head.bias"}));
  EXPECT_EQ(names(net.named_parameters(false)), std::vector<std::string>{});
  EXPECT_EQ(names(net.block.named_parameters(false)), std::vector<std::string>{});
  EXPECT_EQ(names(net.head.named_parameters(false)), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(net.parameters().size(), 5u);
  for (const Tensor& p : net.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_TRUE(net.parameters()[0].is_same(net.block.a.weight));
  EXPECT_EQ(names(net.named_buffers()),
            (std::vector<std::string>{"block.a.running", "block.b.running", "head.running"}));
  EXPECT_FALSE(net.head.running.requires_grad());
  EXPECT_EQ(net.num_parameters(), 15);
}

TEST(Module, NamedModulesAndChildren) {
  Net net;
  std::vector<std::string> n;
  for (auto& [name, m] : net.named_modules()) n.push_back(name);
  EXPECT_EQ(n, (std::vector<std::string>{"", "block", "block.a", "block.b", "head"}));
  EXPECT_EQ(net.children().size(), 2u);
  EXPECT_EQ(&net.child("head"), &net.head);
  EXPECT_TRUE(has(error_of([&] { net.child("nope"); }), "no submodule named 'nope'"));
  EXPECT_EQ(net.type_name(), "Net");
  EXPECT_EQ(net.head.type_name(), "Affine");
}

TEST(Module, RegistrationErrors) {
  Affine a(2);
  Tensor t = zeros({2});
  EXPECT_TRUE(has(error_of([&] { a.register_parameter("weight", &t); }), "already used"));
  EXPECT_TRUE(has(error_of([&] { a.register_buffer("bias", &t); }), "already used"));
  EXPECT_TRUE(has(error_of([&] { a.register_parameter("a.b", &t); }), "must not contain '.'"));
  EXPECT_TRUE(has(error_of([&] { a.register_parameter("", &t); }), "empty name"));
  EXPECT_TRUE(has(error_of([&] { a.register_module("self", &a); }), "own child"));
  Tensor x = tensor({1.0, 2.0}, {.requires_grad = true});
  Tensor nonleaf = x * 2.0;
  EXPECT_TRUE(has(error_of([&] { a.register_parameter("nl", &nonleaf); }), "leaf"));
  EXPECT_THROW(a.register_module("null", static_cast<nn::Module*>(nullptr)), Error);
}

TEST(Module, OwnedRegistrationsAndUndefinedBiasIsSkipped) {
  nn::Module m;
  Tensor& w = m.register_parameter("w", zeros({2, 2}));
  Tensor& b = m.register_buffer("b", ones({2}));
  m.register_buffer("scratch", zeros({1}), /*persistent=*/false);
  auto child = std::make_shared<Affine>(2, false);
  m.register_module("child", child);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_FALSE(b.requires_grad());
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"w", "child.weight"}));
  EXPECT_EQ(names(m.named_buffers()), (std::vector<std::string>{"b", "scratch", "child.running"}));
  // Non-persistent buffers stay out of the state dict.
  EXPECT_EQ(names(m.state_dict()), (std::vector<std::string>{"w", "b", "child.weight", "child.running"}));
  Tensor& frozen = m.register_parameter("frozen", zeros({3}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_EQ(m.num_parameters(), 4 + 2 + 3);
  EXPECT_EQ(m.num_parameters(true), 4 + 2);
}

TEST(Module, SharedParametersAppearOnce) {
  struct Tied : nn::Module {
    Affine a{2}, b{2};
    Tied() {
      b.weight = a.weight;  // tie before registration of the parent: same TensorImpl
      register_modules({{"a", &a}, {"b", &b}});
    }
  } t;
  EXPECT_EQ(names(t.named_parameters()), (std::vector<std::string>{"a.weight", "a.bias", "b.bias"}));
  // state_dict keeps every name, as PyTorch's does.
  EXPECT_EQ(names(t.state_dict()).size(), 6u);
}

TEST(Module, TrainEvalRecursive) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  for (nn::Module* m : net.modules()) EXPECT_FALSE(m->is_training());
  net.block.train();
  EXPECT_TRUE(net.block.a.is_training());
  EXPECT_FALSE(net.head.is_training());
  net.train();
  for (nn::Module* m : net.modules()) EXPECT_TRUE(m->is_training());
}

TEST(Module, ToDtypeIsInPlaceAndKeepsLeafAndGrad) {
  Net net;
  Tensor handle = net.head.weight;  // e.g. held by an optimizer
  net.head.weight.set_grad(ones({3}));
  net.to(DType::Float64);
  EXPECT_EQ(handle.dtype(), DType::Float64);
  EXPECT_TRUE(handle.is_same(net.head.weight));
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_TRUE(handle.is_leaf());
  EXPECT_EQ(handle.grad().dtype(), DType::Float64);
  for (const Tensor& p : net.parameters()) EXPECT_EQ(p.dtype(), DType::Float64);
  for (const Tensor& b : net.buffers()) EXPECT_EQ(b.dtype(), DType::Float64);
  Tensor y = net(ones({2, 3}, {.dtype = DType::Float64}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  y.sum().backward();
  EXPECT_EQ(net.block.a.weight.grad().dtype(), DType::Float64);
  net.to(Device::cpu());  // a no-op move
  EXPECT_TRUE(handle.is_same(net.head.weight));
  EXPECT_THROW(net.to(DType::Int64), Error);
}

TEST(Module, ToDtypeLeavesIntegerBuffers) {
  nn::Module m;
  m.register_buffer("count", zeros({}, {.dtype = DType::Int64}));
  m.register_parameter("w", zeros({2}));
  m.to(DType::Float64);
  EXPECT_EQ(m.named_buffers()[0].second.dtype(), DType::Int64);
  EXPECT_EQ(m.named_parameters()[0].second.dtype(), DType::Float64);
}

TEST(Module, ZeroGradSetsToNoneOrZeroes) {
  Net net;
  net(ones({1, 3})).sum().backward();
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().sum().item(), 0.0);
  }
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, ApplyVisitsChildrenFirst) {
  Net net;
  std::vector<std::string> order;
  net.apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Affine", "Affine", "Block", "Affine", "Net"}));
  net.apply([](nn::Module& m) {
    if (auto* a = dynamic_cast<Affine*>(&m)) {
      NoGradGuard ng;
      a->weight.fill_(2.0);
    }
  });
  EXPECT_EQ(net.head.weight.sum().item(), 6.0);
}

TEST(Module, StateDictRoundTrip) {
  Net a, b;
  {
    NoGradGuard ng;
    int k = 0;
    for (Tensor& p : a.parameters()) p.fill_(++k);
    a.head.running.fill_(7.0);
  }
  nn::StateDict sd = a.state_dict();
  EXPECT_EQ(names(sd), (std::vector<std::string>{"block.a.weight", "block.a.bias", "block.a.running", "block.b.weight",
                                                 "block.b.running", "head.weight", "head.bias", "head.running"}));
  EXPECT_FALSE(sd[0].second.requires_grad());
  nn::LoadResult r = b.load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  for (size_t i = 0; i < sd.size(); ++i)
    EXPECT_TRUE(same_values(sd[i].second, b.state_dict()[i].second)) << sd[i].first;
  // Loading copies: b's tensors are still its own, and still require grad.
  EXPECT_FALSE(b.head.weight.storage() == a.head.weight.storage());
  EXPECT_TRUE(b.head.weight.requires_grad());
}

TEST(Module, LoadStateDictListsEveryMismatch) {
  Net net;
  nn::StateDict sd = net.state_dict();
  sd.erase(sd.begin());                                  // missing block.a.weight
  sd.emplace_back("extra.weight", zeros({1}));           // unexpected
  sd[1].second = zeros({4});                             // block.a.running: shape
  sd[2].second = zeros({3}, {.dtype = DType::Float64});  // block.b.weight: dtype
  const Tensor before = net.block.a.bias.clone();
  sd[0].second = full({3}, 5.0);  // a valid entry: must not be copied when the load fails
  std::string msg = error_of([&] { net.load_state_dict(sd); });
  EXPECT_TRUE(has(msg, "4 error(s)")) << msg;
  EXPECT_TRUE(has(msg, "missing key 'block.a.weight'")) << msg;
  EXPECT_TRUE(has(msg, "unexpected key 'extra.weight'")) << msg;
  EXPECT_TRUE(has(msg, "'block.a.running': shape mismatch, the module has [3], the dict has [4]")) << msg;
  EXPECT_TRUE(has(msg, "'block.b.weight': dtype mismatch, the module has float32, the dict has float64")) << msg;
  EXPECT_TRUE(same_values(net.block.a.bias, before));

  // Non-strict: missing/unexpected are reported, not errors; shape/dtype still are.
  std::string msg2 = error_of([&] { net.load_state_dict(sd, false); });
  EXPECT_TRUE(has(msg2, "2 error(s)")) << msg2;
  EXPECT_FALSE(has(msg2, "missing key"));
  sd[1].second = zeros({3});
  sd[2].second = zeros({3});
  nn::LoadResult r = net.load_state_dict(sd, false);
  EXPECT_EQ(r.missing_keys, std::vector<std::string>{"block.a.weight"});
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(net.block.a.bias.sum().item(), 15.0);
}

TEST(Module, ForwardHooksRunAfterForwardAndCanBeRemoved) {
  Affine a(2);
  int calls = 0;
  Shape seen;
  int64_t id = a.register_forward_hook([&](nn::Module& m, const Tensor& in, const Tensor& out) {
    ++calls;
    seen = out.shape();
    EXPECT_EQ(&m, &a);
    EXPECT_EQ(in.shape(), (Shape{4, 2}));
  });
  a(ones({4, 2}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (Shape{4, 2}));
  a.forward(ones({4, 2}));  // forward() itself runs no hooks
  EXPECT_EQ(calls, 1);
  a.remove_forward_hook(id);
  a(ones({4, 2}));
  EXPECT_EQ(calls, 1);
}

TEST(Module, BaseForwardThrows) {
  nn::Module m;
  EXPECT_TRUE(has(error_of([&] { m(ones({1})); }), "no single-tensor forward"));
}

TEST(Module, SummaryTable) {
  Net net;
  net.block.a.train();
  std::string s = net.summary({2, 3});
  EXPECT_TRUE(has(s, "Layer (type)")) << s;
  EXPECT_TRUE(has(s, "block.a (Affine)")) << s;
  EXPECT_TRUE(has(s, "block.b (Affine)")) << s;
  EXPECT_TRUE(has(s, "head (Affine)")) << s;
  EXPECT_TRUE(has(s, "[2, 3]")) << s;
  EXPECT_TRUE(has(s, "Total params: 15")) << s;
  EXPECT_TRUE(has(s, "Trainable params: 15")) << s;
  EXPECT_TRUE(has(s, "Non-trainable params: 0")) << s;
  // 15 float32 parameters, 9 buffer values; the three Affine outputs [2, 3] are 3 * 24 bytes.
  EXPECT_TRUE(has(s, "Memory: parameters 60 B, buffers 36 B, layer outputs for input [2, 3] 72 B")) << s;
  // Rows in call order, each with its own parameter count.
  EXPECT_LT(s.find("block.a"), s.find("block.b"));
  EXPECT_LT(s.find("block.b"), s.find("head"));
  // Modes are restored and no hooks are left behind.
  EXPECT_TRUE(net.block.a.is_training());
  int calls = 0;
  net.head.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++calls; });
  net(ones({1, 3}));
  EXPECT_EQ(calls, 1);
  nn::Module holder;
  holder.register_module("id", nn::make<nn::Lambda>([](const Tensor& x) { return x; }));
  EXPECT_EQ(holder.repr(), "Module(\n  (id): Lambda()\n)");
}

TEST(Module, SummaryCountsLargeNumbersWithCommas) {
  struct Big : nn::Module {
    Tensor w = zeros({1000, 1234});
    Big() { register_parameter("w", &w); }
    Tensor forward(const Tensor& x) override { return x; }
  } big;
  std::string s = big.summary({1});
  EXPECT_TRUE(has(s, "Total params: 1,234,000")) << s;
  EXPECT_TRUE(has(s, "1,234,000")) << s;
  EXPECT_TRUE(has(s, "Memory: parameters 4.7 MiB")) << s;  // 4,936,000 bytes
}

TEST(Module, SummaryPropagatesForwardErrorsAndRestoresState) {
  Net net;
  EXPECT_THROW(net.summary({2, 5}), Error);  // [2,5] * [3] does not broadcast
  int calls = 0;
  net.head.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++calls; });
  net(ones({1, 3}));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(net.is_training());
}

TEST(Sequential, ChainsAndNamesElements) {
  nn::Sequential seq(nn::make<Affine>(3), nn::make<nn::Lambda>([](const Tensor& x) { return x * 2.0; }, "Double"),
                     nn::make<Affine>(3));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor y = seq(full({2, 3}, 1.5));
  EXPECT_EQ(y.sum().item(), 18.0);
  EXPECT_EQ(seq[1].type_name(), "Double");
  EXPECT_EQ(&seq.at<Affine>(2), seq.items()[2].get());
  EXPECT_THROW(seq.at<Affine>(1), Error);
  EXPECT_THROW(seq[3], Error);
  Affine& added = seq.emplace_back<Affine>(3);
  EXPECT_EQ(seq.size(), 4u);
  EXPECT_EQ(&seq[3], &added);
  std::string s = seq.summary({2, 3});
  EXPECT_TRUE(has(s, "1 (Double)")) << s;
  EXPECT_TRUE(has(s, "Total params: 18")) << s;
  EXPECT_TRUE(has(seq.repr(), "(1): Double()"));
}

TEST(Sequential, NamedConstructionAndNesting) {
  auto inner = std::make_shared<nn::Sequential>(nn::make<Affine>(2));
  nn::Sequential seq({{"first", nn::make<Affine>(2)}, {"inner", inner}});
  EXPECT_EQ(names(seq.named_parameters()),
            (std::vector<std::string>{"first.weight", "first.bias", "inner.0.weight", "inner.0.bias"}));
  EXPECT_EQ(seq(ones({1, 2})).sum().item(), 2.0);
}

TEST(ModuleList, HoldsAndRegisters) {
  struct Stack : nn::Module {
    nn::ModuleList layers;
    Stack() {
      for (int i = 0; i < 3; ++i) layers.push_back(nn::make<Affine>(2));
      register_module("layers", &layers);
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (auto& l : layers) h = (*l)(h);
      return h;
    }
  } s;
  EXPECT_EQ(s.parameters().size(), 6u);
  EXPECT_EQ(s.named_parameters()[4].first, "layers.2.weight");
  EXPECT_EQ(s(ones({1, 2})).sum().item(), 2.0);
  EXPECT_THROW(s.layers[3], Error);
  EXPECT_THROW(s.layers(ones({1})), Error);
  EXPECT_EQ(s.layers.at<Affine>(0).weight.numel(), 2);
}

// A module whose forward takes more than one tensor gets its table from a callable, and an RNN
// called with its own operator() (not Module's) has its row: RNNs run their forward hooks too.
TEST(Module, SummaryOfAForwardWithSeveralInputsListsItsRnn) {
  struct Tagger : nn::Module {
    nn::Embedding embed{10, 4};
    nn::LSTM lstm{4, 3, {.batch_first = true}};
    Tagger() { register_modules({{"embed", &embed}, {"lstm", &lstm}}); }
    Tensor run(const Tensor& tokens, const Tensor& h0) { return lstm(embed(tokens), {.h = h0, .c = h0}).output; }
  } t;
  const Tensor tokens = zeros({1, 5}, {.dtype = DType::Int64}), h0 = zeros({1, 1, 3});
  const std::string s = t.summary("tokens [1, 5] and a state", [&] { t.run(tokens, h0); });
  EXPECT_TRUE(has(s, "embed (Embedding)")) << s;
  EXPECT_TRUE(has(s, "lstm (LSTM)")) << s;
  EXPECT_TRUE(has(s, "[1, 5, 3]")) << s;
  EXPECT_TRUE(has(s, "layer outputs for tokens [1, 5] and a state")) << s;
  EXPECT_TRUE(has(s, "Total params: " + std::to_string(t.num_parameters()))) << s;
}

// A fused Sequential (nn::fuse, layers/fusion.h) runs ReLU then MaxPool2d as MaxPool2d then ReLU: the values
// and the input gradients must be those of the order written, with negatives, zeros, ties and
// NaNs in the windows, in float32 and float64; and a forward hook on either module keeps the
// order written, so the hook sees the full-size rectified tensor.
TEST(Sequential, ReluThenMaxPoolGivesTheValuesAndGradientsOfTheOrderWritten) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<double> v(2 * 3 * 7 * 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int64_t>((i * 37 + i / 5) % 9) - 5);
    v[5] = NAN, v[100] = NAN, v[101] = NAN;
    Tensor xa = from_vector(v, {2, 3, 7, 8}, TensorOptions{.dtype = dt, .requires_grad = true});
    Tensor xb = from_vector(v, {2, 3, 7, 8}, TensorOptions{.dtype = dt, .requires_grad = true});
    nn::Sequential seq(nn::make<nn::ReLU>(), nn::make<nn::MaxPool2d>(2));
    ASSERT_EQ(nn::fuse(seq).size(), 1u);
    Tensor ya = seq(xa);
    Tensor yb = max_pool2d(relu(xb), 2);
    ASSERT_EQ(ya.shape(), yb.shape());
    const std::vector<double> a = vec(ya), b = vec(yb);
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(b[i]))
        EXPECT_TRUE(std::isnan(a[i])) << i;
      else
        EXPECT_EQ(a[i], b[i]) << i;
    }
    std::vector<double> gv(a.size());  // a gradient that differs per output
    for (size_t i = 0; i < gv.size(); ++i) gv[i] = 1.0 + static_cast<double>(i);
    Tensor g = from_vector(gv, ya.shape(), TensorOptions{.dtype = dt});
    ya.mul(g).sum().backward();
    yb.mul(g).sum().backward();
    EXPECT_EQ(vec(xa.grad()), vec(xb.grad()));

    // A hook on the ReLU sees its own output, full size.
    Shape seen;
    seq[0].register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen = out.shape(); });
    seq(xa);
    EXPECT_EQ(seen, (Shape{2, 3, 7, 8}));
  }
}

// A fused Sequential (nn::fuse, layers/fusion.h) runs Conv2d, ReLU, MaxPool2d (and Conv2d, MaxPool2d)
// as conv2d_max_pool2d then ReLU: the output and the gradients of the input and of the convolution's
// weight and bias must be those of the modules run one by one, with a batch large enough for the
// op to cut it into chunks on each thread; a forward hook on the convolution keeps the modules
// apart, so the hook sees the convolution's full output.
TEST(Sequential, ConvThenMaxPoolGivesTheValuesAndGradientsOfTheModulesRunOneByOne) {
  for (bool with_relu : {true, false}) {
    manual_seed(3);
    auto conv = nn::make<nn::Conv2d>(2, 16, 3);
    std::vector<std::shared_ptr<nn::Module>> mods{conv};
    if (with_relu) mods.push_back(nn::make<nn::ReLU>());
    mods.push_back(nn::make<nn::MaxPool2d>(2));
    nn::Sequential seq;
    for (const auto& m : mods) seq.push_back(m);
    ASSERT_EQ(nn::fuse(seq).size(), 1u);
    // 16 x 62 x 62 float32 outputs are 240 KiB an image: two images a chunk.
    const auto diff = [](const Tensor& a, const Tensor& b) {
      const std::vector<double> va = vec(a), vb = vec(b);
      double d = 0, m = 0;
      for (size_t i = 0; i < va.size(); ++i) d = std::max(d, std::abs(va[i] - vb[i])), m = std::max(m, std::abs(vb[i]));
      return d / std::max(1.0, m);
    };
    Tensor xa = randn({9, 2, 64, 64});
    Tensor xb = xa.clone();
    xa.requires_grad_(), xb.requires_grad_();
    Tensor ya = seq(xa);
    if (!with_relu) EXPECT_EQ(ya.grad_fn()->name(), "Conv2dMaxPool2dBackward");  // fused indeed
    Tensor yb = xb;
    for (const auto& m : mods) yb = m->forward(yb);
    ASSERT_EQ(ya.shape(), yb.shape());
    EXPECT_LT(diff(ya, yb), 1e-6);
    Tensor g = randn(ya.shape());
    ya.mul(g).sum().backward();
    const Tensor gw = conv->weight.grad().clone(), gb = conv->bias.grad().clone();
    conv->weight.grad().zero_();
    conv->bias.grad().zero_();
    yb.mul(g).sum().backward();
    EXPECT_LT(diff(xa.grad(), xb.grad()), 1e-6);
    EXPECT_LT(diff(gw, conv->weight.grad()), 1e-5);
    EXPECT_LT(diff(gb, conv->bias.grad()), 1e-5);

    Shape seen;
    conv->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen = out.shape(); });
    seq(xa);
    EXPECT_EQ(seen, (Shape{9, 16, 62, 62}));
  }
}
