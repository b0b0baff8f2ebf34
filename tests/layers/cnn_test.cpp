// The small CNN of the design sketch, written as in libtorch (about as many lines), trained a few
// steps on a fixed random batch: the loss must fall. Also its PyTorch parameter names, its
// summary() table, a state_dict round trip into a fresh model, and the same CNN as a Sequential.
#include "test_util.h"

using namespace ember;
using namespace layers_test;

namespace {

struct Net : nn::Module {
  nn::Conv2d c1{1, 8, 3}, c2{8, 16, 3};
  nn::Linear f1{16 * 5 * 5, 32}, f2{32, 10};
  Net() { register_modules({{"c1", &c1}, {"c2", &c2}, {"f1", &f1}, {"f2", &f2}}); }
  Tensor forward(const Tensor& x) override {
    auto h = max_pool2d(relu(c1(x)), 2);
    h = max_pool2d(relu(c2(h)), 2).flatten(1);
    return f2(relu(f1(h)));
  }
};

}  // namespace

TEST(SmallCnn, TrainsAndTheLossFalls) {
  manual_seed(0);
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 3e-3});
  Generator g(1);
  Tensor x = randn({8, 1, 28, 28}, {}, &g);
  Tensor y = randint(0, 10, {8}, {.dtype = DType::Int64}, &g);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    Tensor loss = nn::cross_entropy(net.forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
}

TEST(SmallCnn, NamesSummaryAndStateDict) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()), (std::vector<std::string>{"c1.weight", "c1.bias", "c2.weight", "c2.bias",
                                                                     "f1.weight", "f1.bias", "f2.weight", "f2.bias"}));
  const int64_t total = 8 * 9 + 8 + 16 * 8 * 9 + 16 + 400 * 32 + 32 + 32 * 10 + 10;
  EXPECT_EQ(net.num_parameters(), total);
  std::string s = net.summary({1, 1, 28, 28});
  EXPECT_TRUE(has(s, "c1 (Conv2d)")) << s;
  EXPECT_TRUE(has(s, "[1, 8, 26, 26]")) << s;
  EXPECT_TRUE(has(s, "[1, 16, 11, 11]")) << s;
  EXPECT_TRUE(has(s, "f2 (Linear)")) << s;
  EXPECT_TRUE(has(s, "[1, 10]")) << s;
  EXPECT_TRUE(has(s, "Total params: 14,410")) << s;
  EXPECT_EQ(total, 14410);

  Net other;
  other.load_state_dict(net.state_dict());
  Tensor x = randn({2, 1, 28, 28});
  EXPECT_EQ(vec(other.forward(x)), vec(net.forward(x)));
}

TEST(SmallCnn, AsSequential) {
  nn::Sequential net(nn::make<nn::Conv2d>(1, 8, 3), nn::make<nn::ReLU>(), nn::make<nn::MaxPool2d>(2),
                     nn::make<nn::Conv2d>(8, 16, 3), nn::make<nn::BatchNorm2d>(16), nn::make<nn::ReLU>(),
                     nn::make<nn::MaxPool2d>(2), nn::make<nn::Flatten>(), nn::make<nn::Dropout>(0.25),
                     nn::make<nn::Linear>(400, 10));
  EXPECT_EQ(net(zeros({3, 1, 28, 28})).shape(), (Shape{3, 10}));
  std::string s = net.summary({1, 1, 28, 28});
  EXPECT_TRUE(has(s, "4 (BatchNorm2d)")) << s;
  EXPECT_TRUE(has(s, "7 (Flatten)")) << s;
  EXPECT_TRUE(has(s, "[1, 400]")) << s;
  // summary() ran in eval mode: the batch norm's statistics were not touched.
  EXPECT_EQ(net.at<nn::BatchNorm2d>(4).num_batches_tracked.item(), 1.0);  // from the forward above only
  EXPECT_EQ(names(net.state_dict())[6], "4.running_mean");
}
