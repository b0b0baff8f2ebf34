// Embedding: lookups of any index shape, padding_idx (zero row, no gradient, negative values),
// from_pretrained, default N(0, 1) initialisation, gradcheck of the weight, errors.
#include <cmath>

#include "test_util.h"

using namespace ember;
using namespace layers_test;

TEST(Embedding, LookupAndPadding) {
  nn::Embedding e(4, 2, {.padding_idx = 1});
  EXPECT_EQ(vec(e.weight.select(0, 1)), (std::vector<double>{0, 0}));
  {
    NoGradGuard ng;
    e.weight.copy_(tensor({{0, 1}, {0, 0}, {2, 3}, {4, 5}}));
  }
  Tensor idx = tensor({{0, 2}, {3, 1}}, {.dtype = DType::Int64});
  Tensor y = e(idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vec(y), (std::vector<double>{0, 1, 2, 3, 4, 5, 0, 0}));
  y.sum().backward();
  EXPECT_EQ(vec(e.weight.grad()), (std::vector<double>{1, 1, 0, 0, 1, 1, 1, 1}));
  nn::Embedding neg(5, 3, {.padding_idx = -1});
  EXPECT_EQ(neg.padding_idx, 4);
  EXPECT_EQ(neg.extra_repr(), "5, 3, padding_idx=4");
  EXPECT_EQ(names(neg.named_parameters()), std::vector<std::string>{"weight"});
}

TEST(Embedding, DefaultInitPretrainedGradcheck) {
  nn::Embedding big(1000, 50);
  std::vector<double> v = vec(big.weight);
  double s2 = 0;
  for (double x : v) s2 += x * x;
  EXPECT_NEAR(std::sqrt(s2 / static_cast<double>(v.size())), 1.0, 0.02);

  auto pre = nn::Embedding::from_pretrained(tensor({{1, 2}, {3, 4}}));
  EXPECT_FALSE(pre->weight.requires_grad());
  EXPECT_EQ(vec((*pre)(tensor({1}, {.dtype = DType::Int64}))), (std::vector<double>{3, 4}));
  auto trainable = nn::Embedding::from_pretrained(tensor({{1, 2}}), false);
  EXPECT_TRUE(trainable->weight.requires_grad());
  EXPECT_TRUE(trainable->parameters()[0].is_same(trainable->weight));

  // The padding row is read but gets no gradient by design, so the check looks up other rows.
  nn::Embedding e(5, 3, {.padding_idx = 0});
  e.to(DType::Float64);
  Tensor idx = tensor({{3, 4, 4}, {2, 1, 3}}, {.dtype = DType::Int64});
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>&) { return e(idx); }, {e.weight});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Embedding, Errors) {
  nn::Embedding e(3, 2);
  EXPECT_THROW(e(tensor({3}, {.dtype = DType::Int64})), Error);
  EXPECT_THROW(nn::Embedding(3, 2, {.padding_idx = 3}), Error);
  EXPECT_THROW(nn::Embedding(0, 2), Error);
}
