// The recurrent text models learn tiny tasks, and the sampler draws from the distribution it
// claims to (frequencies over many seeded draws against the softmax computed by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/ops.h"
#include "layers/nn.h"
#include "models/lstm.h"
#include "models/text_generator.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::models;
using test_util::expect_error;

TEST(SampleLogits, GreedyAndTopOne) {
  Tensor z = tensor({0.5, 2.0, -1.0, 2.0});
  Generator g(1);
  EXPECT_EQ(sample_logits(z, 0.0, 0, g), 1);  // the first of the two largest
  EXPECT_EQ(sample_logits(z, -1.0, 3, g), 1);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_logits(z, 5.0, 1, g), 1);
}

TEST(SampleLogits, FrequenciesFollowTheTemperedSoftmax) {
  // Logits log(1), log(2), log(3), log(4): at temperature 1, p = (1, 2, 3, 4) / 10; at 0.5 the
  // squares (1, 4, 9, 16) / 30; with top-2 at temperature 1 only ids 3 and 2, in 4 : 3.
  Tensor z = tensor({0.0, std::log(2.0), std::log(3.0), std::log(4.0)}, {DType::Float64});
  const int n = 20000;
  auto freq = [&](double temp, int64_t k, uint64_t seed) {
    Generator g(seed);
    std::vector<double> f(4, 0.0);
    for (int i = 0; i < n; ++i) f[static_cast<size_t>(sample_logits(z, temp, k, g))] += 1.0 / n;
    return f;
  };
  auto f1 = freq(1.0, 0, 11);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f1[i], (i + 1) / 10.0, 0.015) << i;
  auto f2 = freq(0.5, 0, 12);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f2[i], (i + 1) * (i + 1) / 30.0, 0.015) << i;
  auto f3 = freq(1.0, 2, 13);
  EXPECT_EQ(f3[0], 0.0);
  EXPECT_EQ(f3[1], 0.0);
  EXPECT_NEAR(f3[3], 4.0 / 7, 0.015);
  EXPECT_EQ(freq(1.0, 0, 11), f1);  // the seed decides everything
}

TEST(SampleLogits, Errors) {
  Generator g;
  expect_error([&] { sample_logits(zeros({2, 3}), 1.0, 0, g); }, "sample_logits", "[V]");
  expect_error([&] { sample_logits(zeros({0}), 1.0, 0, g); }, "sample_logits", "V >= 1");
  expect_error([&] { sample_logits(zeros({3}, {DType::Int64}), 1.0, 0, g); }, "sample_logits", "floating");
  expect_error([&] { sample_logits(zeros({3}), 1.0, -2, g); }, "sample_logits", "top_k");
  expect_error([&] { sample_logits(tensor({1.0, NAN}), 1.0, 0, g); }, "sample_logits", "logit 1 is NaN");
}

TEST(TextGenerator, SeededAndSideEffectFree) {
  manual_seed(5);
  LstmLanguageModel lm({.vocab_size = 12, .embed_dim = 6, .hidden = 10});
  const GeneratorState before = default_generator().state();
  TextGenerator a(lm, {.temperature = 1.0, .seed = 42}), b(lm, {.temperature = 1.0, .seed = 42});
  auto ta = a.generate({1, 2}, 30);
  EXPECT_EQ(ta.size(), 30u);
  EXPECT_EQ(b.generate({1, 2}, 30), ta);
  TextGenerator c(lm, {.temperature = 1.0, .seed = 43});
  EXPECT_NE(c.generate({1, 2}, 30), ta);
  EXPECT_EQ(default_generator().state().offset, before.offset);  // training's stream untouched
  EXPECT_TRUE(lm.is_training());                                 // the mode is restored
  for (int64_t t : ta) EXPECT_TRUE(t >= 0 && t < 12);
  // Stops right after the stop token (greedy: the same token comes back whatever it is).
  TextGenerator greedy(lm, {.temperature = 0.0});
  auto g = greedy.generate({3}, 50);
  auto stopped = greedy.generate({3}, 50, g[4]);
  EXPECT_LE(stopped.size(), 5u);
  EXPECT_EQ(stopped.back(), g[4]);
  EXPECT_TRUE(greedy.generate({3}, 0).empty());
  expect_error([&] { a.generate({}, 3); }, "TextGenerator::generate", "empty");
  expect_error([&] { a.generate({12}, 3); }, "TextGenerator::generate", "out of range");
  expect_error([&] { a.generate({1}, -1); }, "TextGenerator::generate", "non-negative");
  expect_error([&] { TextGenerator(lm, {.top_k = -1}); }, "TextGenerator", "top_k");
}

TEST(TextModels, LstmLanguageModelLearnsAPattern) {
  // The stream 3 4 5 6 3 4 5 6 ...: after training, greedy generation continues it.
  manual_seed(1);
  LstmLanguageModel lm({.vocab_size = 8, .embed_dim = 8, .hidden = 16});
  optim::Adam opt(lm.parameters(), {.lr = 0.02});
  std::vector<int64_t> xs, ys;
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 12; ++t) {
      xs.push_back(3 + (b + t) % 4);
      ys.push_back(3 + (b + t + 1) % 4);
    }
  Tensor x = from_vector(xs, {4, 12}), y = from_vector(ys, {4 * 12});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = cross_entropy(lm(x).reshape({4 * 12, 8}), y);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.1 * first) << first << " -> " << last;
  TextGenerator gen(lm, {.temperature = 0.0});
  EXPECT_EQ(gen.generate({5, 6, 3}, 6), (std::vector<int64_t>{4, 5, 6, 3, 4, 5}));
  Generator g(2);
  EXPECT_EQ(lm.generate({5, 6, 3}, 6, 0.0, &g), (std::vector<int64_t>{4, 5, 6, 3, 4, 5}));
}

TEST(TextModels, BiLstmClassifierLearnsAndIgnoresPadding) {
  // Class 0 sequences use tokens 1-4, class 1 tokens 5-8; lengths 2 to 6, padded with 0.
  manual_seed(2);
  BiLstmClassifier clf({.vocab_size = 9, .embed_dim = 8, .hidden = 8, .classes = 2});
  const int64_t B = 16, T = 6;
  std::vector<int64_t> toks(B * T, 0), lengths(B), labels(B);
  Generator g(9);
  std::vector<int64_t> r = randint(0, 4, {B * T}, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    labels[b] = b % 2;
    lengths[b] = 2 + b % 5;
    for (int64_t t = 0; t < lengths[b]; ++t) toks[b * T + t] = 1 + 4 * labels[b] + r[b * T + t];
  }
  Tensor x = from_vector(toks, {B, T}), y = from_vector(labels, {B});
  optim::Adam opt(clf.parameters(), {.lr = 0.03});
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    Tensor loss = cross_entropy(clf.forward(x, lengths), y);
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  EXPECT_LT(last, 0.2 * first) << first << " -> " << last;
  NoGradGuard ng;
  EXPECT_EQ(argmax(clf.forward(x, lengths), 1).to_vector<int64_t>(), labels);
  // Row 0 (length 2) alone, unpadded, gives the logits it gets inside the padded batch.
  Tensor alone = clf.forward(from_vector(std::vector<int64_t>{toks[0], toks[1]}, {1, 2}), {2});
  Tensor in_batch = clf.forward(x, lengths).select(0, 0);
  auto a = alone.reshape({2}).to_vector<double>(), b = in_batch.to_vector<double>();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
}

// The layers view a pipeline cuts: the same function over the very same tensors, under the
// layers' names, with the random stream left as it was.
TEST(TextModels, LstmLanguageModelAsSequentialSharesItsTensors) {
  manual_seed(5);
  LstmLanguageModel lm({.vocab_size = 13, .embed_dim = 5, .hidden = 6, .layers = 3, .dropout = 0.25});
  const GeneratorState before = default_generator().state();
  auto seq = lm.as_sequential();
  EXPECT_EQ(default_generator().state().seed, before.seed);
  EXPECT_EQ(default_generator().state().offset, before.offset);
  std::vector<std::string> names;
  for (auto& [n, m] : seq->named_children()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "lstm0", "drop0", "lstm1", "drop1", "lstm2", "head"}));
  auto mine = lm.named_parameters(), theirs = seq->named_parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  std::map<std::string, Tensor> by_name(theirs.begin(), theirs.end());
  for (auto& [n, t] : mine) {
    std::string view = n;  // lstm.weight_ih_l2 -> lstm2.weight_ih_l0
    if (n.rfind("lstm.", 0) == 0) view = "lstm" + n.substr(n.size() - 1) + n.substr(4, n.size() - 5) + "0";
    ASSERT_TRUE(by_name.count(view)) << n << " as " << view;
    EXPECT_EQ(by_name[view].data_ptr<float>(), t.data_ptr<float>()) << n;
  }
  lm.eval();
  seq->eval();
  Generator g(6);
  Tensor tokens = randint(0, 13, {2, 7}, {.dtype = DType::Int64}, &g);
  NoGradGuard ng;
  EXPECT_LT(max(abs(sub(seq->forward(tokens), lm(tokens)))).item(), 1e-6);
}
