#include <gtest/gtest.h>

#include "core/ops.h"

using namespace ember;

TEST(Tensor, ZerosHaveShapeAndValues) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dtype(), DType::Float32);
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}
