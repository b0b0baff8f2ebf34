// MaxPool2d, AvgPool2d (ceil_mode, padding, count_include_pad) and AdaptiveAvgPool2d through the
// module API: hand-computed windows, gradchecks in float64, errors.
#include "test_util.h"

using namespace ember;
using namespace layers_test;

namespace {
Tensor grid(int64_t h, int64_t w, DType dt = DType::Float32) {
  return arange(static_cast<double>(h * w), {.dtype = dt}).view({1, 1, h, w});
}
}  // namespace

TEST(MaxPool2dLayer, HandValuesAndCeilMode) {
  EXPECT_EQ(vec(nn::MaxPool2d(2)(grid(4, 4))), (std::vector<double>{5, 7, 13, 15}));
  nn::MaxPool2d floor_mode(3, {.stride = 2});
  EXPECT_EQ(vec(floor_mode(grid(4, 4))), (std::vector<double>{10}));
  nn::MaxPool2d ceil(3, {.stride = 2, .ceil_mode = true});
  EXPECT_EQ(vec(ceil(grid(4, 4))), (std::vector<double>{10, 11, 14, 15}));
  nn::MaxPool2d padded(3, {.stride = 1, .padding = 1});
  EXPECT_EQ(padded(grid(4, 4)).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(vec(padded(grid(4, 4)))[0], 5.0);
  EXPECT_EQ(ceil.extra_repr(), "kernel_size=3, stride=2, padding=0, ceil_mode=true");
}

TEST(AvgPool2dLayer, HandValuesCeilModeAndPadding) {
  EXPECT_EQ(vec(nn::AvgPool2d(2)(grid(4, 4))), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  // Windows that run past the input in ceil mode divide by the part inside it.
  nn::AvgPool2d ceil(3, {.stride = 2, .ceil_mode = true});
  EXPECT_EQ(vec(ceil(grid(4, 4))), (std::vector<double>{5, 6.5, 11, 12.5}));
  Tensor x = tensor({{1, 2}, {3, 4}}).view({1, 1, 2, 2});
  EXPECT_EQ(vec(nn::AvgPool2d(2, {.padding = 1})(x)), (std::vector<double>{0.25, 0.5, 0.75, 1}));
  EXPECT_EQ(vec(nn::AvgPool2d(2, {.padding = 1, .count_include_pad = false})(x)), (std::vector<double>{1, 2, 3, 4}));
}

TEST(AdaptiveAvgPool2dLayer, GlobalAndOverlapping) {
  EXPECT_EQ(vec(nn::AdaptiveAvgPool2d(1)(grid(4, 4))), (std::vector<double>{7.5}));
  EXPECT_EQ(vec(nn::AdaptiveAvgPool2d(2)(grid(4, 4))), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  Tensor y = nn::AdaptiveAvgPool2d(3)(grid(4, 4));  // windows [0,2), [1,3), [2,4)
  EXPECT_EQ(vec(y)[0], 2.5);
  EXPECT_EQ(vec(y)[4], 7.5);
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 2})(zeros({2, 3, 5, 7})).shape(), (Shape{2, 3, 1, 2}));
}

TEST(Pooling, Gradcheck) {
  Tensor x = rand64({2, 2, 5, 5}, 3);  // random values: no ties in the max
  nn::MaxPool2d mp(2);
  gradcheck_module(mp, x);
  nn::MaxPool2d mpc(3, {.stride = 2, .padding = 1, .ceil_mode = true});
  gradcheck_module(mpc, x);
  nn::AvgPool2d ap(3, {.stride = 2, .ceil_mode = true});
  gradcheck_module(ap, x);
  nn::AvgPool2d app(2, {.stride = 1, .padding = 1, .count_include_pad = false});
  gradcheck_module(app, x);
  nn::AdaptiveAvgPool2d ad({3, 2});
  gradcheck_module(ad, x);
}

TEST(Pooling, Errors) {
  EXPECT_TRUE(has(error_of([] { nn::MaxPool2d(2, {.padding = 2}); }), "half the kernel"));
  EXPECT_TRUE(has(error_of([] { nn::AvgPool2d(0); }), "kernel_size"));
  EXPECT_THROW(nn::MaxPool2d(2)(zeros({4})), Error);
}
