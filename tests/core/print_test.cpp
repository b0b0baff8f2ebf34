// PyTorch-style printing.
#include <gtest/gtest.h>

#include "core/ops.h"

using namespace ember;

TEST(Print, MatrixOfIntegralFloats) {
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
}

TEST(Print, FixedAndScientific) {
  EXPECT_EQ(tensor({0.5, -1.25}).str(), "tensor([ 0.5000, -1.2500])");
  EXPECT_EQ(tensor({1e-6, 1.0}).str(), "tensor([1.0000e-06, 1.0000e+00])");
}

TEST(Print, DtypesAndScalars) {
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(tensor({1, 2}, {.dtype = DType::Float64}).str(), "tensor([1., 2.], dtype=float64)");
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(ones({2}).to(DType::Bool).str(), "tensor([True, True])");
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(zeros({1}, {.requires_grad = true}).str(), "tensor([0.], requires_grad=True)");
}

TEST(Print, SummarisesLargeTensors) {
  std::string s = arange(2000).str();
  EXPECT_EQ(s, "tensor([   0,    1,    2, ..., 1997, 1998, 1999])");
  std::string m = zeros({100, 100}).str();
  EXPECT_NE(m.find("..."), std::string::npos);
  EXPECT_LT(m.size(), 600u);
}

TEST(Print, ThreeDims) {
  EXPECT_EQ(arange(8).reshape({2, 2, 2}).str(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
}
