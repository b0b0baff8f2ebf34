// Image transforms: values against hand-worked cases, and randomness that comes only from the
// Generator passed in.
#include "data/transforms.h"

#include <gtest/gtest.h>

#include <set>

#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::data;
using namespace ember::data::transforms;
using test_util::expect_error;

namespace {
// [C, H, W] float image whose value at (k, y, x) is 100k + 10y + x.
Tensor coded(int64_t c, int64_t h, int64_t w) {
  std::vector<float> v;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) v.push_back(static_cast<float>(100 * k + 10 * y + x));
  return from_vector(v, {c, h, w});
}
float at(const Tensor& t, int64_t k, int64_t y, int64_t x) {
  return t.select(0, k).select(0, y).select(0, x).item<float>();
}
}  // namespace

TEST(Transforms, NormalizePerChannel) {
  Generator g(0);
  Tensor x = coded(2, 1, 2);  // {0, 1}, {100, 101}
  EXPECT_EQ(normalize({1, 100}, {2, 4})(x, g).to_vector<float>(), (std::vector<float>{-0.5f, 0, 0, 0.25f}));
  EXPECT_EQ(normalize({1}, {0.5})(x, g).to_vector<float>(), (std::vector<float>{-2, 0, 198, 200}));
  expect_error([&] { normalize({1, 2, 3}, {1, 1, 1})(x, g); }, "normalize", "3 means for an image with 2 channels");
  expect_error([&] { normalize({1}, {0}); }, "normalize", "positive");
  expect_error([&] { normalize({1}, {1})(zeros({4}), g); }, "normalize", "[C, H, W]");
}

TEST(Transforms, ToTensorScalesAndMovesChannelsFirst) {
  Generator g(0);
  Tensor hwc = from_vector(std::vector<uint8_t>{0, 255, 51, 102}, {1, 2, 2});  // H=1, W=2, C=2
  Tensor t = to_tensor()(hwc, g);
  EXPECT_EQ(t.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 0.2f, 1, 0.4f}));
  EXPECT_EQ(to_tensor()(from_vector(std::vector<uint8_t>{255, 0}, {1, 2}), g).shape(), (Shape{1, 1, 2}));
  Tensor f = coded(1, 2, 2);
  EXPECT_TRUE(to_tensor()(f, g).is_same(f));
  expect_error([&] { to_tensor()(zeros({2}, {.dtype = DType::Int64}), g); }, "to_tensor", "uint8");
}

TEST(Transforms, RandomCropIsAWindowOfThePaddedImage) {
  Tensor x = coded(2, 4, 4);
  std::set<std::pair<int, int>> offsets;
  for (uint64_t s = 0; s < 200; ++s) {
    Generator g(s);
    Tensor c = random_crop(3, 3, 1, -1)(x, g);
    ASSERT_EQ(c.shape(), (Shape{2, 3, 3}));
    // Recover the window's top-left from its first in-image pixel and check every pixel.
    bool matched = false;
    for (int top = 0; top <= 3 && !matched; ++top)
      for (int left = 0; left <= 3 && !matched; ++left) {
        bool ok = true;
        for (int k = 0; k < 2; ++k)
          for (int y = 0; y < 3; ++y)
            for (int xx = 0; xx < 3; ++xx) {
              int sy = y + top - 1, sx = xx + left - 1;
              float want = (sy >= 0 && sy < 4 && sx >= 0 && sx < 4) ? 100 * k + 10 * sy + sx : -1;
              ok = ok && at(c, k, y, xx) == want;
            }
        if (ok) {
          matched = true;
          offsets.insert({top, left});
        }
      }
    EXPECT_TRUE(matched) << "seed " << s;
  }
  EXPECT_EQ(offsets.size(), 16u);  // every one of the 4 x 4 positions occurs
  Generator g(0);
  expect_error([&] { random_crop(7, 7, 1)(x, g); }, "random_crop", "larger than the padded image 6x6");
}

TEST(Transforms, HorizontalFlip) {
  Tensor x = coded(1, 2, 3);
  Generator g(0);
  EXPECT_EQ(random_horizontal_flip(1.0)(x, g).to_vector<float>(), (std::vector<float>{2, 1, 0, 12, 11, 10}));
  EXPECT_EQ(random_horizontal_flip(0.0)(x, g).to_vector<float>(), x.to_vector<float>());
  int flipped = 0;
  for (uint64_t s = 0; s < 400; ++s) {
    Generator gs(s);
    flipped += random_horizontal_flip(0.5)(x, gs).to_vector<float>()[0] == 2;
  }
  EXPECT_GT(flipped, 150);
  EXPECT_LT(flipped, 250);
  expect_error([&] { random_horizontal_flip(1.5); }, "random_horizontal_flip", "[0, 1]");
}

TEST(Transforms, AffineRotatesAndShiftsExactly) {
  // 3x3 image: a quarter turn counter-clockwise (as displayed) moves the top-right corner to the
  // top-left, and the top-left to the bottom-left.
  Tensor x = coded(1, 3, 3);
  Tensor r = affine_image(x, 90, 0, 0);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{2, 12, 22, 1, 11, 21, 0, 10, 20}));
  // A shift right by 1 and down by 1 with fill 5.
  Tensor t = affine_image(x, 0, 1, 1, 5);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{5, 5, 5, 5, 0, 1, 5, 10, 11}));
  EXPECT_EQ(affine_image(x, 0, 0, 0).to_vector<float>(), x.to_vector<float>());
  // Half a pixel shift blends neighbours bilinearly.
  Tensor h = affine_image(coded(1, 1, 2), 0, 0.5, 0, 0);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{0, 0.5f}));
  // random_affine with no range is the identity; with a range it changes the image and is a
  // pure function of the generator's state.
  Generator g0(0);
  EXPECT_EQ(random_affine(0, 0)(x, g0).to_vector<float>(), x.to_vector<float>());
  Tensor big = coded(1, 8, 8);
  Generator a(3), b(3), c(4);
  Tensor ra = random_affine(20, 0.2)(big, a);
  EXPECT_EQ(ra.to_vector<float>(), random_affine(20, 0.2)(big, b).to_vector<float>());
  EXPECT_NE(ra.to_vector<float>(), random_affine(20, 0.2)(big, c).to_vector<float>());
  EXPECT_NE(ra.to_vector<float>(), big.to_vector<float>());
  expect_error([&] { random_affine(200, 0); }, "random_affine", "degrees");
}

TEST(Transforms, ComposeAppliesInOrderWithOneGenerator) {
  Tensor x = coded(1, 2, 3);
  Generator g(0);
  Transform t = compose({random_horizontal_flip(1.0), normalize({1}, {2})});
  EXPECT_EQ(t(x, g).to_vector<float>(), (std::vector<float>{0.5f, 0, -0.5f, 5.5f, 5, 4.5f}));
  // Two random transforms draw successive numbers: the result differs from reusing one seed twice.
  Transform crops = compose({random_crop(4, 5, 1), random_crop(2, 3, 1)});
  Generator g1(9), g2(9);
  EXPECT_EQ(crops(x, g1).to_vector<float>(), crops(x, g2).to_vector<float>());
  expect_error([&] { compose({nullptr}); }, "compose", "empty");
}

TEST(Transforms, Uniform01ConsumesTheGenerator) {
  Generator g(5);
  double a = uniform01(g), b = uniform01(g);
  EXPECT_NE(a, b);
  EXPECT_GE(a, 0.0);
  EXPECT_LT(a, 1.0);
  EXPECT_EQ(g.state().offset, 2u);
  Generator h(5);
  EXPECT_EQ(uniform01(h), a);
}
