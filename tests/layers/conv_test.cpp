// Conv2d and ConvTranspose2d through the module API: hand-computed outputs for stride, padding,
// "same", dilation and groups; output shapes; PyTorch's parameter names, layouts and default
// initialisation bounds; float64 gradchecks of every variant; errors.
#include <cmath>

#include "test_util.h"

using namespace ember;
using namespace layers_test;

namespace {
Tensor grid(int64_t h, int64_t w) {
  return arange(static_cast<double>(h * w), {.dtype = DType::Float32}).view({1, 1, h, w});
}
void set_ones(nn::Module& m) {
  NoGradGuard ng;
  for (Tensor& p : m.parameters()) p.fill_(1.0);
}
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : vec(t)) m = std::max(m, std::abs(v));
  return m;
}
}  // namespace

TEST(Conv2dLayer, HandValuesStridePaddingSameDilation) {
  nn::Conv2d c(1, 1, 3, {.bias = false});
  set_ones(c);
  EXPECT_EQ(vec(c(grid(4, 4))), (std::vector<double>{45, 54, 81, 90}));
  nn::Conv2d s(1, 1, 3, {.stride = 2, .padding = 1, .bias = false});
  set_ones(s);
  EXPECT_EQ(vec(s(grid(4, 4))), (std::vector<double>{10, 24, 51, 90}));
  nn::Conv2d same(1, 1, 3, {.padding = "same", .bias = false});
  set_ones(same);
  Tensor y = same(grid(4, 4));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(vec(y)[0], 10.0);
  nn::Conv2d dil(1, 1, 3, {.dilation = 2, .bias = false});
  set_ones(dil);
  EXPECT_EQ(vec(dil(grid(5, 5))), (std::vector<double>{108}));
  nn::Conv2d valid(1, 1, 3, {.padding = "valid"});
  EXPECT_EQ(valid(grid(4, 4)).shape(), (Shape{1, 1, 2, 2}));
  // The bias adds per output channel.
  nn::Conv2d b(1, 2, 1);
  {
    NoGradGuard ng;
    b.weight.fill_(1.0);
    b.bias.copy_(tensor({10, 20}));
  }
  EXPECT_EQ(vec(b(grid(1, 2))), (std::vector<double>{10, 11, 20, 21}));
}

TEST(Conv2dLayer, ShapesGroupsNamesAndInit) {
  nn::Conv2d c(3, 8, {3, 5}, {.stride = {2, 1}, .padding = {1, 2}});
  EXPECT_EQ(c.weight.shape(), (Shape{8, 3, 3, 5}));
  EXPECT_EQ(c(zeros({2, 3, 7, 9})).shape(), (Shape{2, 8, 4, 9}));
  EXPECT_EQ(names(c.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  nn::Conv2d g(4, 6, 1, {.groups = 2});
  EXPECT_EQ(g.weight.shape(), (Shape{6, 2, 1, 1}));
  // Group k of the output sees only group k of the input.
  {
    NoGradGuard ng;
    g.weight.fill_(1.0);
    g.bias.fill_(0.0);
  }
  Tensor x = tensor({1, 2, 3, 4}).view({1, 4, 1, 1});
  EXPECT_EQ(vec(g(x)), (std::vector<double>{3, 3, 3, 7, 7, 7}));
  // PyTorch's default: weight and bias within 1/sqrt(fan_in), fan_in = in/groups * kh * kw.
  nn::Conv2d big(16, 32, 3);
  EXPECT_LE(max_abs(big.weight), 1.0 / 12);
  EXPECT_GT(max_abs(big.weight), 0.95 / 12);
  EXPECT_LE(max_abs(big.bias), 1.0 / 12);
  EXPECT_EQ(c.extra_repr(), "3, 8, kernel_size=(3, 5), stride=(2, 1), padding=(1, 2)");
}

TEST(Conv2dLayer, GradcheckVariants) {
  Tensor x = rand64({2, 2, 5, 5}, 1);
  nn::Conv2d plain(2, 3, 3);
  gradcheck_module(plain, x);
  nn::Conv2d strided(2, 2, 3, {.stride = 2, .padding = 1});
  gradcheck_module(strided, x);
  nn::Conv2d dilated(2, 2, 2, {.dilation = 2, .bias = false});
  gradcheck_module(dilated, x);
  nn::Conv2d grouped(2, 4, {3, 2}, {.padding = {1, 0}, .groups = 2});
  gradcheck_module(grouped, x);
  nn::Conv2d same(2, 2, 4, {.padding = "same"});  // even kernel: asymmetric "same" padding
  gradcheck_module(same, x);
}

TEST(Conv2dLayer, Errors) {
  EXPECT_TRUE(has(error_of([] { nn::Conv2d(3, 4, 3, {.groups = 2}); }), "divisible by groups"));
  EXPECT_TRUE(has(error_of([] { nn::Conv2d(4, 3, 3, {.groups = 2}); }), "divisible by groups"));
  EXPECT_TRUE(has(error_of([] { nn::Conv2d(1, 1, 3, {.stride = 2, .padding = "same"}); }), "strided"));
  EXPECT_TRUE(has(error_of([] { nn::Conv2d(1, 1, 3, {.padding = "full"}); }), "'full'"));
  EXPECT_TRUE(has(error_of([] { nn::Conv2d(1, 1, 0); }), "kernel_size"));
  nn::Conv2d c(3, 4, 3);
  EXPECT_TRUE(has(error_of([&] { c(zeros({1, 2, 5, 5})); }), "conv2d")) << error_of([&] { c(zeros({1, 2, 5, 5})); });
}

TEST(ConvTranspose2dLayer, HandValuesShapesAndInit) {
  nn::ConvTranspose2d up(1, 1, 2, {.stride = 2, .bias = false});
  set_ones(up);
  Tensor y = up(tensor({{1, 2}, {3, 4}}).view({1, 1, 2, 2}));
  EXPECT_EQ(vec(y), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  nn::ConvTranspose2d t(4, 6, 3, {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
  EXPECT_EQ(t.weight.shape(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(t(zeros({1, 4, 3, 3})).shape(), (Shape{1, 6, 6, 6}));
  EXPECT_EQ(names(t.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  // fan_in of the weight tensor: out/groups * kh * kw = 4 * 9.
  nn::ConvTranspose2d big(8, 4, 3);
  EXPECT_LE(max_abs(big.weight), 1.0 / 6);
  EXPECT_GT(max_abs(big.weight), 0.9 / 6);
  EXPECT_LE(max_abs(big.bias), 1.0 / 6);
  EXPECT_TRUE(
      has(error_of([] { nn::ConvTranspose2d(1, 1, 3, {.stride = 2, .output_padding = 2}); }), "output_padding"));
}

TEST(ConvTranspose2dLayer, GradcheckVariants) {
  Tensor x = rand64({2, 2, 3, 3}, 2);
  nn::ConvTranspose2d plain(2, 3, 3);
  gradcheck_module(plain, x);
  nn::ConvTranspose2d strided(2, 2, 3, {.stride = 2, .padding = 1, .output_padding = 1});
  gradcheck_module(strided, x);
  nn::ConvTranspose2d grouped(2, 4, 2, {.stride = {2, 1}, .groups = 2, .bias = false});
  gradcheck_module(grouped, x);
  nn::ConvTranspose2d dilated(2, 1, 2, {.dilation = 2});
  gradcheck_module(dilated, x);
}
