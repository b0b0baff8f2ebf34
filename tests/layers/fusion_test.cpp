// The fusion pass (layers/fusion.h): a Sequential runs its elements one by one until nn::fuse
// turns fusion on; fused, it gives the outputs and gradients of the modules run one by one, with
// the same parameter names; nn::fuse reaches nested Sequentials and says what it fused.
#include "layers/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/autograd/node.h"
#include "test_util.h"

using namespace ember;
using layers_test::names;
using layers_test::vec;

namespace {

// The largest difference of two tensors' values, relative to the second's largest magnitude.
double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = vec(a), vb = vec(b);
  double d = 0, m = 0;
  for (size_t i = 0; i < va.size(); ++i) d = std::max(d, std::abs(va[i] - vb[i])), m = std::max(m, std::abs(vb[i]));
  return d / std::max(1.0, m);
}

// Conv, ReLU, MaxPool; Conv, MaxPool; BatchNorm, ReLU, MaxPool; a head: every fused run there is.
std::shared_ptr<nn::Sequential> small_cnn() {
  return std::make_shared<nn::Sequential>(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>>{
      {"c1", nn::make<nn::Conv2d>(2, 16, 3)},
      {"relu1", nn::make<nn::ReLU>()},
      {"pool1", nn::make<nn::MaxPool2d>(2)},  // 30 -> 15
      {"c2", nn::make<nn::Conv2d>(16, 8, 2)},
      {"pool2", nn::make<nn::MaxPool2d>(2)},  // 14 -> 7
      {"bn", nn::make<nn::BatchNorm2d>(8)},
      {"relu3", nn::make<nn::ReLU>()},
      {"pool3", nn::make<nn::MaxPool2d>(2)},  // 7 -> 3
      {"flatten", nn::make<nn::Flatten>()},
      {"fc", nn::make<nn::Linear>(72, 5)}});
}

}  // namespace

// Without nn::fuse, Sequential::forward runs each element through its own op: the last node of
// a Conv2d then MaxPool2d is the pooling's, and of a ReLU then MaxPool2d too.
TEST(Fusion, SequentialRewritesNothingOnItsOwn) {
  nn::Sequential conv_pool(nn::make<nn::Conv2d>(2, 4, 3), nn::make<nn::MaxPool2d>(2));
  nn::Sequential relu_pool(nn::make<nn::ReLU>(), nn::make<nn::MaxPool2d>(2));
  EXPECT_FALSE(conv_pool.fusion());
  const Tensor x = randn({2, 2, 8, 8}, {.requires_grad = true});
  EXPECT_EQ(conv_pool(x).grad_fn()->name(), "MaxPool2dBackward");
  EXPECT_EQ(relu_pool(x).grad_fn()->name(), "MaxPool2dBackward");

  nn::fuse(conv_pool), nn::fuse(relu_pool);
  EXPECT_TRUE(conv_pool.fusion());
  EXPECT_EQ(conv_pool(x).grad_fn()->name(), "Conv2dMaxPool2dBackward");
  EXPECT_EQ(relu_pool(x).grad_fn()->name(), "ReluBackward");  // the pooling ran first

  nn::unfuse(conv_pool);
  EXPECT_FALSE(conv_pool.fusion());
  EXPECT_EQ(conv_pool(x).grad_fn()->name(), "MaxPool2dBackward");
}

// nn::fuse names each run it fuses, in order, with the elements' dotted names in the model, and
// reaches a Sequential nested in another module.
TEST(Fusion, NamesTheRunsItFusesInNestedSequentials) {
  nn::Sequential outer;
  outer.push_back("features", small_cnn());
  const std::vector<nn::FusedRun> runs = nn::fuse(outer);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].modules, (std::vector<std::string>{"features.c1", "features.relu1", "features.pool1"}));
  EXPECT_EQ(runs[0].as, "conv2d_max_pool2d, relu");
  EXPECT_EQ(runs[1].modules, (std::vector<std::string>{"features.c2", "features.pool2"}));
  EXPECT_EQ(runs[1].as, "conv2d_max_pool2d");
  EXPECT_EQ(runs[2].modules, (std::vector<std::string>{"features.relu3", "features.pool3"}));
  EXPECT_EQ(runs[2].as, "max_pool2d, relu");
  EXPECT_TRUE(outer.fusion());
  EXPECT_TRUE(outer.at<nn::Sequential>(0).fusion());
}

// A fused model and an unfused one with the same weights give the same outputs and gradients
// (within the rounding of the fused op's sums), in training and in evaluation, and keep the same
// parameter names and module tree: fusion changes how the elements run, not what they are.
TEST(Fusion, FusedAndUnfusedModelsAgree) {
  manual_seed(5);
  auto fused = small_cnn();
  auto plain = small_cnn();
  plain->load_state_dict(fused->state_dict());
  // Something must be fused, or agreeing would prove nothing.
  ASSERT_FALSE(nn::fuse(*fused).empty());
  EXPECT_EQ(names(fused->state_dict()), names(plain->state_dict()));
  EXPECT_EQ(fused->size(), plain->size());
  for (bool training : {true, false}) {
    fused->train(training), plain->train(training);
    Tensor xa = randn({9, 2, 32, 32});
    Tensor xb = xa.clone();
    xa.requires_grad_(), xb.requires_grad_();
    Tensor ya = (*fused)(xa), yb = (*plain)(xb);
    ASSERT_EQ(ya.shape(), yb.shape());
    EXPECT_LT(rel_diff(ya, yb), 1e-5);
    if (!training) continue;
    Tensor g = randn(ya.shape());
    ya.mul(g).sum().backward();
    yb.mul(g).sum().backward();
    EXPECT_LT(rel_diff(xa.grad(), xb.grad()), 1e-5);
    const auto pa = fused->named_parameters(), pb = plain->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i)
      EXPECT_LT(rel_diff(pa[i].second.grad(), pb[i].second.grad()), 1e-4) << pa[i].first;
  }
}

// A forward hook keeps the hooked module out of any fused run (it sees its own full output), and
// summary() lists every layer of a fused model.
TEST(Fusion, AHookedModuleRunsOnItsOwn) {
  auto net = small_cnn();
  nn::fuse(*net);
  Shape seen;
  (*net)[0].register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) { seen = out.shape(); });
  (*net)(zeros({1, 2, 32, 32}));
  EXPECT_EQ(seen, (Shape{1, 16, 30, 30}));
  const std::string s = net->summary({1, 2, 32, 32});
  for (const char* row : {"c1 (Conv2d)", "relu1 (ReLU)", "pool1 (MaxPool2d)", "pool3 (MaxPool2d)"})
    EXPECT_NE(s.find(row), std::string::npos) << row << "\n" << s;
}
