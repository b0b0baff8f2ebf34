#include <gtest/gtest.h>

#include "core/autograd/gradcheck.h"
#include "core/ops.h"

using namespace ember;

TEST(AutogradSmoke, MulAddBackward) {
  Tensor x = tensor({1, 2, 3}, {.requires_grad = true});
  Tensor y = tensor({4, 5, 6}, {.requires_grad = true});
  Tensor z = (x * y + x).sum();
  z.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(y.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(AutogradSmoke, GradcheckBroadcastDiv) {
  Tensor a = randn({3, 4}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor b = (rand({4}, {.dtype = DType::Float64}) + 1.0).detach().requires_grad_();
  auto r = gradcheck([](const std::vector<Tensor>& in) { return in[0] / in[1] * in[0]; }, {a, b});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(AutogradSmoke, ViewsGradcheck) {
  Tensor a = randn({3, 4}, {.dtype = DType::Float64, .requires_grad = true});
  auto r = gradcheck(
      [](const std::vector<Tensor>& in) {
        return in[0].t().slice(0, 1, 3).reshape({2, 3}) * in[0].select(1, 2).unsqueeze(0).expand({2, 3});
      },
      {a});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(AutogradSmoke, PrintLooksLikePyTorch) {
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
}
