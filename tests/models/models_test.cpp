// The model zoo: shapes, parameter counts, bad inputs, and that MnistCnn learns a tiny task.
#include <gtest/gtest.h>

#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

using namespace ember;
using namespace ember::models;

TEST(Models, MnistCnnShapesAndParameterCount) {
  MnistCnn net;
  EXPECT_EQ(net(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  // 320 + 18496 + 36928 + 36928 + 650
  EXPECT_EQ(net.num_parameters(), 93322);
  EXPECT_THROW(net(zeros({2, 3, 28, 28})), Error);
  LeNet5 le;
  EXPECT_EQ(le(zeros({3, 1, 28, 28})).shape(), (Shape{3, 10}));
}

TEST(Models, MnistCnnLossFallsOnATinySubset) {
  manual_seed(0);
  MnistCnn net;
  optim::Adam opt(net.parameters(), {.lr = 2e-3});
  Generator g(1);
  Tensor x = randn({16, 1, 28, 28}, {}, &g);
  Tensor y = randint(0, 10, {16}, {.dtype = DType::Int64}, &g);
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    Tensor loss = cross_entropy(net(x), y);
    if (i == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, first * 0.5);
}

TEST(Models, GanShapes) {
  MlpGenerator g;
  MlpDiscriminator d;
  Tensor img = g(randn({4, kNoiseDim}));
  EXPECT_EQ(img.shape(), (Shape{4, 1, 28, 28}));
  EXPECT_EQ(d(img).shape(), (Shape{4, 1}));
  DcganGenerator dg;
  DcganDiscriminator dd;
  Tensor im2 = dg(randn({2, kNoiseDim}));
  EXPECT_EQ(im2.shape(), (Shape{2, 1, 28, 28}));
  EXPECT_EQ(dd(im2).shape(), (Shape{2, 1}));
  EXPECT_THROW(g(randn({4, 7})), Error);
}

TEST(Models, LstmModels) {
  LstmLanguageModel lm({.vocab_size = 20, .embed_dim = 8, .hidden = 16});
  Tensor tokens = randint(0, 20, {3, 5}, {.dtype = DType::Int64});
  EXPECT_EQ(lm(tokens).shape(), (Shape{3, 5, 20}));
  Generator g(3);
  auto out = lm.generate({1, 2, 3}, 6, 1.0, &g);
  EXPECT_EQ(out.size(), 6u);
  for (int64_t t : out) EXPECT_TRUE(t >= 0 && t < 20);
  BiLstmClassifier clf({.vocab_size = 30, .embed_dim = 8, .hidden = 6, .classes = 4});
  Tensor toks = randint(1, 30, {3, 7}, {.dtype = DType::Int64});
  EXPECT_EQ(clf.forward(toks, {7, 4, 2}).shape(), (Shape{3, 4}));
}
