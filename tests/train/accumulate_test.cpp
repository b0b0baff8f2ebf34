// Gradient accumulation (train/accumulate.h) in one process: micro-batches of uneven sizes give the
// classifier's and the language model's steps the parameters and metrics of one pass over the
// batch (float64, so that only the order of the sums differs), class weights and ignored targets
// included; the divisor is cross_entropy's own; the flags and the daemon's variable are checked.
#include "train/accumulate.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "layers/nn.h"
#include "models/lstm.h"
#include "train/classifier.h"
#include "train/language_model.h"
#include "train/training.h"

using namespace ember;
using namespace ember::train;

namespace {

// Restores the run's micro-batch count however a test ends.
struct AccumulationScope {
  explicit AccumulationScope(int64_t n) { run_accumulation() = n; }
  ~AccumulationScope() { run_accumulation() = 1; }
};

struct Mlp : nn::Module {
  nn::Linear a{6, 8}, b{8, 4};
  Mlp() { register_modules({{"a", &a}, {"b", &b}}); }
  Tensor forward(const Tensor& x) override { return b(tanh(a(x))); }
};

std::vector<double> flat_params(nn::Module& m) {
  std::vector<double> out;
  for (const Tensor& p : m.parameters())
    for (double v : p.to_vector<double>()) out.push_back(v);
  return out;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = a.size() == b.size() ? 0.0 : 1e300;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

struct ClassifierRun {
  std::vector<double> params;
  RunningSums sums;
};

// Two Adam steps of the classifier on 10 examples in `pieces` micro-batches.
ClassifierRun classifier_run(int64_t pieces, const CrossEntropyOptions& criterion) {
  AccumulationScope scope(pieces);
  manual_seed(5);
  Mlp net;
  net.to(DType::Float64);
  optim::Adam opt(net.parameters(), {.lr = 0.05});
  ClassifierRun r;
  for (int s = 0; s < 2; ++s) {
    Generator g(40 + static_cast<uint64_t>(s));
    Tensor x = randn({10, 6}, {.dtype = DType::Float64}, &g);
    Tensor y = randint(0, 4, {10}, {.dtype = DType::Int64}, &g);
    y.data_ptr<int64_t>()[3] = -100;  // ignored: the divisor counts 9 targets, weighted
    classifier_step(net, opt, Device::cpu(), nullptr, x, y, r.sums, criterion);
  }
  r.params = flat_params(net);
  return r;
}

}  // namespace

TEST(Accumulate, MicroBatchRangesSplitAsTensorSplit) {
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(micro_batch_ranges(10, 3), (R{{0, 4}, {4, 7}, {7, 10}}));
  EXPECT_EQ(micro_batch_ranges(10, 1), (R{{0, 10}}));
  EXPECT_EQ(micro_batch_ranges(3, 8), (R{{0, 1}, {1, 2}, {2, 3}})) << "more pieces than rows: one row each";
  EXPECT_EQ(micro_batch_ranges(0, 4), (R{{0, 0}}));
  EXPECT_THROW(micro_batch_ranges(10, 0), Error);
}

TEST(Accumulate, TheDivisorIsCrossEntropysOwn) {
  Generator g(3);
  Tensor logits = randn({12, 5}, {.dtype = DType::Float64}, &g);
  Tensor y = randint(0, 5, {12}, {.dtype = DType::Int64}, &g);
  y.data_ptr<int64_t>()[0] = 7, y.data_ptr<int64_t>()[5] = 7;  // ignore_index below
  for (bool weighted : {false, true}) {
    CrossEntropyOptions o{.ignore_index = 7, .label_smoothing = 0.1};
    if (weighted) o.weight = from_vector(std::vector<double>{0.5, 2, 1, 3, 0.25}, {5}).to(DType::Float64);
    CrossEntropyOptions summed = o;
    summed.reduction = Reduction::Sum;
    const double mean = cross_entropy(logits, y, o).item(), total = cross_entropy(logits, y, summed).item();
    EXPECT_NEAR(total / cross_entropy_divisor(y, o), mean, 1e-12) << (weighted ? "weighted" : "unweighted");
  }
  EXPECT_EQ(cross_entropy_divisor(y, {.ignore_index = 7}), 10.0);
  EXPECT_THROW(cross_entropy_divisor(logits, {}), Error) << "probability targets have no class divisor";
}

TEST(Accumulate, ClassifierMicroBatchesGiveTheBatchsStep) {
  CrossEntropyOptions criterion{.weight = from_vector(std::vector<double>{1, 2, 0.5, 3}, {4}).to(DType::Float64)};
  const ClassifierRun one = classifier_run(1, criterion);
  for (int64_t pieces : {3, 10, 64}) {  // 4+3+3 rows, one row each, and more pieces than rows
    const ClassifierRun acc = classifier_run(pieces, criterion);
    EXPECT_LT(max_diff(one.params, acc.params), 1e-12) << pieces << " micro-batches";
    EXPECT_NEAR(one.sums.at("loss_sum"), acc.sums.at("loss_sum"), 1e-12) << pieces;
    EXPECT_EQ(one.sums.at("correct"), acc.sums.at("correct")) << pieces;
    EXPECT_EQ(one.sums.at("seen"), acc.sums.at("seen")) << pieces;
  }
  manual_seed(5);
  Mlp init;
  init.to(DType::Float64);
  EXPECT_GT(max_diff(one.params, flat_params(init)), 1e-3) << "the steps did not move the parameters";
}

TEST(Accumulate, LanguageModelMicroBatchesGiveTheBatchsStep) {
  auto run = [](int64_t pieces) {
    AccumulationScope scope(pieces);
    manual_seed(8);
    models::LstmLanguageModel lm({.vocab_size = 9, .embed_dim = 4, .hidden = 5});
    lm.to(DType::Float64);
    optim::Adam opt(lm.parameters(), {.lr = 0.02});
    const char* argv[] = {"accumulate_test"};
    Flags flags(1, const_cast<char**>(argv), "test");
    ParallelJob job("accumulate_test", ParallelFlags(flags));  // not started: one process
    RunningSums sums;
    Generator g(11);
    Tensor x = randint(0, 9, {5, 7}, {.dtype = DType::Int64}, &g),
           y = randint(0, 9, {5, 7}, {.dtype = DType::Int64}, &g);
    lm_step(/*clip=*/0.5, lm, lm.parameters(), opt, Device::cpu(), job, x, y, sums);
    return std::make_pair(flat_params(lm), sums);
  };
  const auto [one, one_sums] = run(1);
  const auto [acc, acc_sums] = run(2);  // 3 + 2 sequences
  EXPECT_LT(max_diff(one, acc), 1e-12);
  EXPECT_NEAR(one_sums.at("loss_sum"), acc_sums.at("loss_sum"), 1e-10);
  EXPECT_EQ(one_sums.at("correct"), acc_sums.at("correct"));
}

TEST(Accumulate, TheFlagAndTheDaemonsVariableSetTheRunsCount) {
  AccumulationScope scope(1);
  auto common = [](std::vector<const char*> args, bool declared) {
    args.insert(args.begin(), "accumulate_test");
    Flags flags(static_cast<int>(args.size()), const_cast<char**>(args.data()), "test");
    CommonFlags cf(flags, 1, 8, 0.1, "accumulate_test", {.accumulate = declared});
    flags.finish();
    cf.check(flags);
    return cf;
  };
  EXPECT_EQ(common({"--accumulate", "4"}, true).accumulate, 4);
  EXPECT_EQ(run_accumulation(), 4);
  EXPECT_EQ(common({}, true).accumulate, 1);
  EXPECT_EQ(run_accumulation(), 1);

  ::setenv("EMBER_ELASTIC_RANKS", "1", 1);
  ::setenv("EMBER_ELASTIC_ACCUMULATE", "3", 1);
  CommonFlags cf = common({}, true);
  cf.apply_elastic();
  EXPECT_EQ(cf.accumulate, 3);
  EXPECT_EQ(run_accumulation(), 3);
  CommonFlags own = common({"--accumulate", "2"}, true);  // the daemon's factor on the job's own
  own.apply_elastic();
  EXPECT_EQ(own.accumulate, 6);
  CommonFlags gan = common({}, false);  // a program whose step cannot be split
  try {
    gan.apply_elastic();
    ADD_FAILURE() << "a GAN took EMBER_ELASTIC_ACCUMULATE 3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EMBER_ELASTIC_ACCUMULATE 3: this program does not accumulate"),
              std::string::npos)
        << e.what();
  }
  ::setenv("EMBER_ELASTIC_ACCUMULATE", "0", 1);
  CommonFlags bad = common({}, true);
  EXPECT_THROW(bad.apply_elastic(), Error);
  ::unsetenv("EMBER_ELASTIC_ACCUMULATE");
  ::unsetenv("EMBER_ELASTIC_RANKS");
}
