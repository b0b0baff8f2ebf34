// DataParallel on real ranks: steps through the wrapper with unequal shares end with the parameters
// one process gets on the global batch; the ranks agree on a flag one of them raised and add up
// their sums; the summary names the shares, buckets and backend; a checkpoint written through it
// restores every rank's model; the wait for a late rank's gradients is counted.
#include "dist/data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "dist_test_util.h"
#include "layers/nn.h"
#include "models/mnist_cnn.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using test_util::error_of;
using test_util::has;

namespace {

double max_param_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<double>(), vb = pb[i].to_vector<double>();
    for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
  }
  return worst;
}

// 1, 2, ... per rank: unequal shares, which only the loss weight makes average right.
std::vector<double> unequal_weights() {
  std::vector<double> w;
  for (int r = 0; r < comm().size(); ++r) w.push_back(r + 1.0);
  return w;
}

}  // namespace

TEST(DataParallel, UnequalSharesMatchOneProcessOnTheGlobalBatch) {
  const int64_t global = 12;
  manual_seed(200 + static_cast<uint64_t>(comm().rank()));  // different weights per rank, until rank 0's win
  models::MnistCnn model;
  DataParallel net(model, comm(), global, {.weights = unequal_weights()});
  manual_seed(200);
  models::MnistCnn ref;
  ASSERT_EQ(max_param_diff(model, ref), 0.0) << "DataParallel did not start from rank 0's parameters";
  int64_t offset = 0;
  for (int r = 0; r < comm().rank(); ++r) offset += net.shares()[static_cast<size_t>(r)];
  optim::SGD opt(model.parameters(), {.lr = 0.05});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.05});
  for (int s = 0; s < 2; ++s) {
    Generator g(17 + static_cast<uint64_t>(s));
    Tensor x = randn({global, 1, 28, 28}, {}, &g), y = randint(0, 10, {global}, {.dtype = DType::Int64}, &g);
    const int64_t share = net.shares()[static_cast<size_t>(comm().rank())];
    Tensor loss = net.weight(cross_entropy(net(x.narrow(0, offset, share)), y.narrow(0, offset, share)));
    opt.zero_grad();
    loss.backward();
    opt.step();
    EXPECT_FALSE(net.end_step()) << "fixed shares changed";
    ref_opt.zero_grad();
    cross_entropy(ref(x), y).backward();
    ref_opt.step();
  }
  EXPECT_LT(max_param_diff(model, ref), 2e-5) << "rank " << comm().rank();
  manual_seed(200);
  models::MnistCnn init;
  EXPECT_GT(max_param_diff(model, init), 1e-3) << "the parameters did not move";
  // The weight is size * share / global, and the shard weights reproduce the shares.
  const double share = static_cast<double>(net.shares()[static_cast<size_t>(comm().rank())]);
  EXPECT_DOUBLE_EQ(net.loss_weight(), comm().size() * share / static_cast<double>(global));
  EXPECT_EQ(net.shard_weights().size(), static_cast<size_t>(comm().size()));
}

// Gradient accumulation through the wrapper, as train/accumulate.h runs it: each rank's unequal
// share in three micro-batches, the first two under no_sync, each loss summed and divided by the
// share's size before the rank's weight. One synchronised step a batch (not three), and the
// parameters one process gets on the global batch.
TEST(DataParallel, MicroBatchesUnderNoSyncAreOneSynchronisedStepOfTheGlobalBatch) {
  const int64_t global = 6 * comm().size() * (comm().size() + 1) / 2;  // shares 6, 12, ... (at least 3 rows)
  manual_seed(300 + static_cast<uint64_t>(comm().rank()));
  models::MnistCnn model;
  DataParallel net(model, comm(), global, {.weights = unequal_weights()});
  manual_seed(300);
  models::MnistCnn ref;
  int64_t offset = 0;
  for (int r = 0; r < comm().rank(); ++r) offset += net.shares()[static_cast<size_t>(r)];
  const int64_t share = net.shares()[static_cast<size_t>(comm().rank())];
  optim::SGD opt(model.parameters(), {.lr = 0.05});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.05});
  for (int s = 0; s < 2; ++s) {
    Generator g(27 + static_cast<uint64_t>(s));
    Tensor x = randn({global, 1, 28, 28}, {}, &g), y = randint(0, 10, {global}, {.dtype = DType::Int64}, &g);
    opt.zero_grad();
    const int64_t piece = (share + 2) / 3;
    for (int64_t begin = 0; begin < share; begin += piece) {
      const int64_t n = std::min(piece, share - begin);
      std::optional<DistributedDataParallel::NoSync> hold;
      if (begin + n < share) hold.emplace(net.ddp());
      Tensor xi = x.narrow(0, offset + begin, n), yi = y.narrow(0, offset + begin, n);
      Tensor loss = cross_entropy(net(xi), yi, {.reduction = Reduction::Sum}) / static_cast<double>(share);
      net.weight(loss).backward();
    }
    EXPECT_EQ(net.ddp().steps_synchronized(), s + 1) << "one all-reduce a batch, after its last micro-batch";
    opt.step();
    EXPECT_FALSE(net.end_step());
    ref_opt.zero_grad();
    cross_entropy(ref(x), y).backward();
    ref_opt.step();
  }
  EXPECT_LT(max_param_diff(model, ref), 2e-5) << "rank " << comm().rank();
}

TEST(DataParallel, AnyIsTrueOnEveryRankWhenOneRankRaisesIt) {
  models::MnistCnn model;
  DataParallel net(model, comm(), 8);
  EXPECT_TRUE(net.any(comm().rank() == comm().size() - 1));
  EXPECT_FALSE(net.any(false));
}

TEST(DataParallel, SumAddsEachValueOverTheRanks) {
  models::MnistCnn model;
  DataParallel net(model, comm(), 8);
  const double n = comm().size();
  std::vector<double> s = net.sum({static_cast<double>(comm().rank()), 1.0, 0.25});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], n * (n - 1) / 2);
  EXPECT_EQ(s[1], n);
  EXPECT_EQ(s[2], 0.25 * n);
  EXPECT_TRUE(net.sum({}).empty());
}

TEST(DataParallel, SummaryNamesTheSharesBucketsAndBackend) {
  models::MnistCnn model;
  DataParallel net(model, comm(), 6 * comm().size(), {.ddp = {.overlap = false}});
  const std::string s = net.summary();
  std::string shares;
  for (int r = 0; r < comm().size(); ++r) shares += (r ? "/" : "") + std::to_string(6);
  EXPECT_TRUE(has(s, "Data-parallel over " + std::to_string(comm().size()) + " ranks: shares of each batch " + shares))
      << s;
  EXPECT_TRUE(has(s, "gradient buckets (" + comm().backend() + "), overlap off")) << s;
}

TEST(DataParallel, AWeightPerRankIsRequired) {
  models::MnistCnn model;
  // One weight too many, whatever the number of ranks (tests/multinode runs this suite on four).
  const std::vector<double> weights(static_cast<size_t>(comm().size()) + 1, 1.0);
  const std::string e = error_of([&] { DataParallel net(model, comm(), 8, {.weights = weights}); });
  EXPECT_TRUE(has(e, "expected one weight per rank")) << e;
}

TEST(DataParallel, ACheckpointRestoresEveryRanksModel) {
  // One folder per world size: ctest runs the 2- and 3-rank suites at the same time.
  const std::string dir = "data_parallel_ckpt_np" + std::to_string(comm().size());
  manual_seed(300);
  models::MnistCnn model;
  DataParallel net(model, comm(), 8);
  optim::SGD opt(model.parameters(), {.lr = 0.1});
  if (comm().rank() == 0) std::filesystem::create_directories(dir);
  comm().barrier("mkdir")->wait();
  TrainingPosition pos;
  pos.step = 5;
  net.save(dir, {&model, {&opt}, {}}, pos, {{"flag.lr", "0.1"}});
  manual_seed(301);
  models::MnistCnn other;
  optim::SGD other_opt(other.parameters(), {.lr = 0.1});
  ASSERT_GT(max_param_diff(model, other), 0.0);
  DistributedResume r = net.load(dir, {&other, {&other_opt}, {}}, /*allow_reshard=*/false);
  EXPECT_EQ(r.position.step, 5);
  EXPECT_EQ(r.metadata.at("flag.lr"), "0.1");
  EXPECT_FALSE(r.resharded);
  EXPECT_EQ(max_param_diff(model, other), 0.0);
  comm().barrier("done")->wait();
  if (comm().rank() == 0) std::filesystem::remove_all(dir);
}

// The wait an elastic job reports (sync_s=): the last rank starts its backward a second after the
// others (all leave one all-reduce together first), so every other rank's step waits, after its own
// last gradient, at least that second less its own few-millisecond backward for the gradients; the
// bound is taken at half the second so that a loaded machine's scheduling cannot break it. A step
// inside no_sync() synchronises nothing and adds nothing.
TEST(DataParallel, TheWaitForALateRanksGradientsIsCountedAfterTheLastGradient) {
  if (comm().size() < 2) GTEST_SKIP() << "needs two ranks";
  manual_seed(400);
  nn::Linear model(4, 2);
  DataParallel net(model, comm(), 4 * comm().size());
  EXPECT_EQ(net.exposed_sync_seconds(), 0.0);
  Tensor x = randn({4, 4}), y = randint(0, 2, {4}, {.dtype = DType::Int64});
  const bool late = comm().rank() == comm().size() - 1;
  for (int s = 0; s < 2; ++s) {
    EXPECT_FALSE(net.any(false));
    if (late && s == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    Tensor loss = net.weight(cross_entropy(net(x), y));
    model.zero_grad();
    loss.backward();
    net.end_step();
  }
  const double waited = net.exposed_sync_seconds();
  EXPECT_TRUE(std::isfinite(waited) && waited >= 0) << waited;
  if (!late) {
    EXPECT_GT(waited, 0.5) << "rank " << comm().rank();
  }
  {
    auto guard = net.ddp().no_sync();
    Tensor loss = net.weight(cross_entropy(net(x), y));
    loss.backward();
  }
  net.end_step();
  EXPECT_EQ(net.exposed_sync_seconds(), waited) << "a step that synchronised nothing waited for nothing";
}

// The noise scale's inputs with unequal shares: each rank's own gradient is that of its share's
// mean loss (the loss weight that makes the shares average right is taken back out), and the
// ranks' mean of its squared norm is that of one batch the harmonic mean of the shares. Checked
// against a plain model on each rank's share, and the estimate against the formula with that batch
// (inputs near one and one class for all: a strong signal, so the one-step estimate is defined).
TEST(DataParallel, UnequalSharesGiveTheNoiseScaleEachRanksOwnGradient) {
  if (comm().size() < 2) GTEST_SKIP() << "needs two ranks";
  const int64_t global = 12;
  manual_seed(500 + static_cast<uint64_t>(comm().rank()));
  nn::Linear model(8, 3);
  DataParallel net(model, comm(), global, {.weights = unequal_weights(), .measure_noise = true});
  manual_seed(500);
  nn::Linear ref(8, 3);
  Generator g(21);
  Tensor x = randn({global, 8}, {}, &g) * 0.1 + 1.0, y = zeros({global}, {.dtype = DType::Int64});
  int64_t offset = 0;
  double inverse = 0;
  for (int r = 0; r < comm().size(); ++r) {
    const double share = static_cast<double>(net.shares()[static_cast<size_t>(r)]);
    if (r < comm().rank()) offset += static_cast<int64_t>(share);
    inverse += 1 / share;
  }
  const int64_t share = net.shares()[static_cast<size_t>(comm().rank())];
  Tensor loss = net.weight(cross_entropy(net(x.narrow(0, offset, share)), y.narrow(0, offset, share)));
  model.zero_grad();
  loss.backward();
  net.end_step();
  cross_entropy(ref(x.narrow(0, offset, share)), y.narrow(0, offset, share)).backward();
  double own = 0;
  for (const Tensor& p : ref.parameters())
    for (double v : p.grad().to_vector<double>()) own += v * v;
  const double want = net.sum({own})[0] / comm().size();
  const GradNorms& n = net.ddp().last_grad_norms();
  ASSERT_TRUE(n.valid);
  EXPECT_NEAR(n.local_sqr, want, 1e-5 * want) << "rank " << comm().rank();
  NoiseScale formula;
  formula.add(noise_sample(want, comm().size() / inverse, n.global_sqr, static_cast<double>(global)));
  ASSERT_TRUE(formula.value() && net.noise_scale());
  EXPECT_NEAR(*net.noise_scale(), *formula.value(), 1e-4 * std::abs(*formula.value()));
  for (double bad : {0.0, -1.0, std::nan("")}) {
    const std::string e = error_of([&] { net.ddp().set_loss_weight(bad); });
    EXPECT_TRUE(has(e, "a loss weight must be positive and finite")) << e;
  }
}
