// The model zoo: shapes, parameter counts, bad inputs, and that MnistCnn learns a tiny task.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "layers/checkpoint.h"
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

// The example fuses MnistCnn (nn::fuse, layers/fusion.h): its two conv, ReLU, max-pool runs, and
// no other, run as conv2d_max_pool2d then ReLU, with the outputs of the layers run one by one.
TEST(Models, MnistCnnFusesItsTwoConvReluPoolRuns) {
  manual_seed(2);
  MnistCnn fused, plain;
  plain.load_state_dict(fused.state_dict());
  const std::vector<nn::FusedRun> runs = nn::fuse(fused);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].modules, (std::vector<std::string>{"c1", "relu1", "pool1"}));
  EXPECT_EQ(runs[1].modules, (std::vector<std::string>{"c2", "relu2", "pool2"}));
  EXPECT_EQ(runs[1].as, "conv2d_max_pool2d, relu");
  EXPECT_FALSE(plain.fusion());
  const Tensor x = randn({4, 1, 28, 28});
  const std::vector<float> a = fused(x).to_vector<float>(), b = plain(x).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4) << i;
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

namespace {
bool has_key(const nn::StateDict& sd, const std::string& key) {
  return std::any_of(sd.begin(), sd.end(), [&](const auto& kv) { return kv.first == key; });
}
double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (a - b).abs().max().item();
}
}  // namespace

TEST(Models, DcganParameterCountsWithAndWithoutBatchNorm) {
  // The recipe: fc 100*12544+12544, t1 256*128*25+128, t2 128*64*25+64, t3 64*25+1.
  DcganGenerator plain({.batch_norm = false});
  EXPECT_EQ(plain.num_parameters(), 1266944 + 819328 + 204864 + 1601);
  auto psd = plain.state_dict();
  EXPECT_EQ(psd.size(), 8u);
  EXPECT_TRUE(has_key(psd, "fc.bias"));
  EXPECT_FALSE(has_key(psd, "bn0.weight"));
  // Default (the TensorFlow tutorial's): no bias on fc, t1, t2; BN weight+bias on 12544, 128, 64.
  DcganGenerator bn;
  EXPECT_TRUE(bn.options.batch_norm);
  EXPECT_EQ(bn.num_parameters(), 1254400 + 819200 + 204800 + 1601 + 2 * (12544 + 128 + 64));
  auto sd = bn.state_dict();
  EXPECT_FALSE(has_key(sd, "fc.bias"));
  EXPECT_FALSE(has_key(sd, "t1.bias"));
  EXPECT_FALSE(has_key(sd, "t2.bias"));
  EXPECT_TRUE(has_key(sd, "t3.bias"));
  for (const char* b : {"bn0", "bn1", "bn2"})
    for (const char* k : {".weight", ".bias", ".running_mean", ".running_var", ".num_batches_tracked"})
      EXPECT_TRUE(has_key(sd, std::string(b) + k)) << b << k;
  // D: c1 1*64*25+64, c2 64*128*25+128, fc 6272+1.
  EXPECT_EQ(DcganDiscriminator().num_parameters(), 1664 + 204928 + 6273);
}

TEST(Models, DcganGeneratorAppliesBatchNormAfterFcT1AndT2) {
  manual_seed(3);
  DcganGenerator g;
  Tensor z = randn({5, kNoiseDim});
  // Training mode normalises with batch statistics and moves the running statistics.
  Tensor out = g(z);
  EXPECT_EQ(out.shape(), (Shape{5, 1, 28, 28}));
  EXPECT_EQ(g.bn0.num_batches_tracked.item(), 1.0);
  EXPECT_EQ(g.bn2.num_batches_tracked.item(), 1.0);
  EXPECT_GT(g.bn0.running_mean.abs().max().item(), 0.0);
  // Eval mode against the layers composed by hand in the documented order.
  g.eval();
  NoGradGuard ng;
  Tensor h = leaky_relu(g.bn0(g.fc(z)), 0.2).view({5, 256, 7, 7});
  h = leaky_relu(g.bn1(g.t1(h)), 0.2);
  h = leaky_relu(g.bn2(g.t2(h)), 0.2);
  Tensor expected = tanh(g.t3(h));
  EXPECT_LT(max_abs_diff(g(z), expected), 1e-6);
  // And it differs from the same weights without the normalisation, so the check can fail.
  Tensor h2 = leaky_relu(g.fc(z), 0.2).view({5, 256, 7, 7});
  h2 = leaky_relu(g.t2(leaky_relu(g.t1(h2), 0.2)), 0.2);
  EXPECT_GT(max_abs_diff(tanh(g.t3(h2)), expected), 1e-3);
}

TEST(Models, DcganGeneratorCheckpointKeepsRunningStatistics) {
  namespace fs = std::filesystem;
  const std::string path =
      (fs::temp_directory_path() / ("ember_dcgan_" + std::to_string(::getpid()) + ".ckpt")).string();
  manual_seed(4);
  DcganGenerator g;
  g(randn({8, kNoiseDim}));  // moves the running statistics away from 0 and 1
  g(randn({8, kNoiseDim}));
  save(g, path);
  DcganGenerator restored;
  load(restored, path);
  EXPECT_EQ(restored.bn1.num_batches_tracked.item(), 2.0);
  EXPECT_EQ(max_abs_diff(restored.bn0.running_mean, g.bn0.running_mean), 0.0);
  EXPECT_EQ(max_abs_diff(restored.bn2.running_var, g.bn2.running_var), 0.0);
  g.eval();
  restored.eval();
  Tensor z = randn({3, kNoiseDim});
  EXPECT_EQ(max_abs_diff(g(z), restored(z)), 0.0);
  // A generator built without batch normalisation cannot load it: a clear error, not garbage.
  DcganGenerator plain({.batch_norm = false});
  EXPECT_THROW(load(plain, path), Error);
  fs::remove(path);
}

// The generator's stride-2 transposed convolutions at their real sizes (128 -> 64 channels, 5x5,
// padding 2, output_padding 1), forward and both gradients against a direct float64 sum: the
// kernel tests use small random geometries, and a sample grid of dots at the stride-2 positions
// is what a wrong large-channel path would also give.
TEST(Models, DcganTransposedConvolutionsMatchDirectSums) {
  for (int layer : {2, 3}) {
    manual_seed(10 + layer);
    DcganGenerator g;
    nn::ConvTranspose2d& t = layer == 2 ? g.t2 : g.t3;
    const int64_t N = 2, C = t.in_channels, OC = t.out_channels, H = layer == 2 ? 7 : 14, OH = 2 * H, K = 5;
    Tensor x = randn({N, C, H, H}).requires_grad_(true);
    Tensor y = t(x);
    ASSERT_EQ(y.shape(), (Shape{N, OC, OH, OH}));
    Tensor gy = randn({N, OC, OH, OH});
    (y * gy).sum().backward();
    const auto xv = x.to_vector<double>(), wv = t.weight.to_vector<double>(), gyv = gy.to_vector<double>();
    std::vector<double> ref(static_cast<size_t>(N * OC * OH * OH), 0.0), gx(xv.size(), 0.0), gw(wv.size(), 0.0);
    if (t.bias.defined()) {
      const auto bv = t.bias.to_vector<double>();
      for (int64_t i = 0; i < N * OC * OH * OH; ++i) ref[size_t(i)] = bv[size_t((i / (OH * OH)) % OC)];
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ih = 0; ih < H; ++ih)
          for (int64_t iw = 0; iw < H; ++iw) {
            const size_t xi = size_t(((n * C + c) * H + ih) * H + iw);
            for (int64_t o = 0; o < OC; ++o)
              for (int64_t kh = 0; kh < K; ++kh)
                for (int64_t kw = 0; kw < K; ++kw) {
                  const int64_t oh = ih * 2 - 2 + kh, ow = iw * 2 - 2 + kw;
                  if (oh < 0 || oh >= OH || ow < 0 || ow >= OH) continue;
                  const size_t yi = size_t(((n * OC + o) * OH + oh) * OH + ow),
                               wi = size_t(((c * OC + o) * K + kh) * K + kw);
                  ref[yi] += xv[xi] * wv[wi];
                  gx[xi] += gyv[yi] * wv[wi];
                  gw[wi] += gyv[yi] * xv[xi];
                }
          }
    auto max_err = [](const std::vector<double>& a, const std::vector<double>& b) {
      double m = 0;
      for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / (1.0 + std::abs(b[i])));
      return m;
    };
    EXPECT_LT(max_err(y.to_vector<double>(), ref), 1e-4) << "t" << layer;
    EXPECT_LT(max_err(x.grad().to_vector<double>(), gx), 1e-4) << "t" << layer;
    EXPECT_LT(max_err(t.weight.grad().to_vector<double>(), gw), 1e-4) << "t" << layer;
  }
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
