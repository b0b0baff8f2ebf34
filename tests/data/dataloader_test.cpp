// DataLoader: batching, determinism across worker counts and resumes, sharding.
#include "data/dataloader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/ops.h"

using namespace ember;
using namespace ember::data;

namespace {

// Example i is [i, noise] where noise comes from the per-example generator, so it exposes both
// the order and the randomness a transform would see.
TensorDataset make_ds(int64_t n) {
  Tensor x = arange(0, static_cast<double>(n), 1, {.dtype = DType::Float32}).reshape({n, 1});
  Tensor y = arange(n);
  return TensorDataset(x, y, [](const Tensor& in, Generator& g) {
    Tensor noise = rand({1}, {}, &g);
    Tensor out = empty({2});
    out.slice(0, 0, 1).copy_(in);
    out.slice(0, 1, 2).copy_(noise);
    return out;
  });
}

std::vector<std::vector<float>> epoch_batches(DataLoader& dl) {
  std::vector<std::vector<float>> out;
  for (auto& [x, y] : dl) out.push_back(x.to_vector<float>());
  return out;
}

}  // namespace

TEST(DataLoader, BatchesCoverTheDatasetOnce) {
  TensorDataset ds = make_ds(10);
  DataLoader dl(ds, {.batch_size = 4, .shuffle = true, .seed = 3});
  EXPECT_EQ(dl.batches_per_epoch(), 3);
  std::multiset<int64_t> seen;
  std::vector<int64_t> sizes;
  for (auto& [x, y] : dl) {
    sizes.push_back(y.numel());
    for (int64_t v : y.to_vector<int64_t>()) seen.insert(v);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(seen.size(), 10u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(seen.count(i), 1u);
  DataLoader dl2(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dl2.batches_per_epoch(), 2);
}

TEST(DataLoader, NoShuffleKeepsOrder) {
  TensorDataset ds = make_ds(5);
  DataLoader dl(ds, {.batch_size = 2, .shuffle = false});
  std::vector<int64_t> order;
  for (auto& [x, y] : dl)
    for (int64_t v : y.to_vector<int64_t>()) order.push_back(v);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DataLoader, SameBatchesWhateverTheWorkerCount) {
  TensorDataset ds = make_ds(37);
  std::vector<std::vector<std::vector<float>>> runs;
  for (int workers : {0, 1, 3}) {
    DataLoader dl(ds, {.batch_size = 5, .shuffle = true, .workers = workers, .seed = 11});
    auto e0 = epoch_batches(dl);
    auto e1 = epoch_batches(dl);
    EXPECT_NE(e0, e1);  // a new epoch reshuffles and redraws the transforms' randomness
    e0.insert(e0.end(), e1.begin(), e1.end());
    runs.push_back(e0);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(DataLoader, ResumeFromSavedPositionGivesTheSameBatches) {
  TensorDataset ds = make_ds(23);
  DataLoader full(ds, {.batch_size = 4, .workers = 2, .seed = 5});
  auto ref0 = epoch_batches(full);
  auto ref1 = epoch_batches(full);
  DataLoader part(ds, {.batch_size = 4, .workers = 2, .seed = 5});
  std::vector<std::vector<float>> got;
  int taken = 0;
  for (auto& [x, y] : part) {
    got.push_back(x.to_vector<float>());
    if (++taken == 3) break;  // stop mid-epoch, as a checkpointing run would
  }
  LoaderPosition saved = part.position();
  EXPECT_EQ(saved.epoch, 0);
  EXPECT_EQ(saved.batch, 3);
  DataLoader resumed(ds, {.batch_size = 4, .workers = 1, .seed = 5});
  resumed.set_position(saved);
  for (auto& [x, y] : resumed) got.push_back(x.to_vector<float>());
  EXPECT_EQ(got, ref0);
  EXPECT_EQ(epoch_batches(resumed), ref1);
}

// What a training loop does to its loader besides reading whole epochs: it stops part-way (a
// checkpoint, an early stop), jumps to a saved position while workers are building ahead, and is
// destroyed with batches in flight. Each of these must stop or restart the workers with nothing
// left running and nothing delivered twice or out of order. CI's thread-sanitised pass runs this
// suite, where any unsynchronised hand-over between a worker and the consumer is a reported race.
TEST(DataLoader, StoppingJumpingAndDestroyingMidEpochWithWorkersInFlight) {
  TensorDataset ds = make_ds(61);
  DataLoader ref(ds, {.batch_size = 3, .workers = 0, .seed = 9});
  const auto ref0 = epoch_batches(ref), ref1 = epoch_batches(ref);
  for (int trial = 0; trial < 12; ++trial) {
    const int workers = 1 + trial % 4;
    DataLoader dl(ds, {.batch_size = 3, .workers = workers, .prefetch = 1 + trial % 3, .seed = 9});
    const int64_t stop_at = trial % 7;
    int64_t taken = 0;
    for (auto& [x, y] : dl) {
      ASSERT_EQ(x.to_vector<float>(), ref0[static_cast<size_t>(taken)]) << "trial " << trial;
      if (++taken == stop_at) break;
    }
    if (trial % 3 == 0) continue;  // destroyed with workers building ahead
    // Jump backwards while the abandoned epoch's batches may still be in flight, then read on.
    const int64_t back = trial % 2;
    dl.set_position({0, back});
    std::vector<std::vector<float>> got;
    for (auto& [x, y] : dl) got.push_back(x.to_vector<float>());
    ASSERT_EQ(got, std::vector<std::vector<float>>(ref0.begin() + back, ref0.end())) << "trial " << trial;
    EXPECT_EQ(epoch_batches(dl), ref1) << "trial " << trial;
  }
}

TEST(DataLoader, ShardsSplitEachGlobalBatchAcrossRanks) {
  TensorDataset ds = make_ds(50);
  for (int world : {2, 3}) {
    std::multiset<int64_t> seen;
    std::vector<std::vector<int64_t>> per_rank_sizes(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      DataLoader dl(ds, {.batch_size = 8, .seed = 9, .rank = r, .world_size = world});
      for (auto& [x, y] : dl) {
        per_rank_sizes[r].push_back(y.numel());
        for (int64_t v : y.to_vector<int64_t>()) seen.insert(v);
      }
    }
    // 50 = 6 * 8 + 2: the last batch of 2 is kept for 2 ranks and dropped for 3 (a rank would get none).
    const size_t expected = world == 2 ? 50u : 48u;
    EXPECT_EQ(seen.size(), expected);
    for (int64_t v : seen) EXPECT_EQ(seen.count(v), 1u) << "world " << world << " sample " << v;
    for (size_t b = 0; b < per_rank_sizes[0].size(); ++b) {
      int64_t total = 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_GE(per_rank_sizes[r][b], 1);
        total += per_rank_sizes[r][b];
      }
      EXPECT_EQ(total, b < 6 ? 8 : 2);
    }
  }
}

TEST(DataLoader, WeightedShardSizes) {
  EXPECT_EQ(DataLoader::shard_sizes(64, 2, {}), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(DataLoader::shard_sizes(64, 2, {3, 1}), (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(DataLoader::shard_sizes(10, 3, {}), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(DataLoader::shard_sizes(7, 3, {1, 2, 4}), (std::vector<int64_t>{1, 2, 4}));
  auto s = DataLoader::shard_sizes(101, 3, {0.5, 0.3, 0.2});
  EXPECT_EQ(s[0] + s[1] + s[2], 101);
}

TEST(DataLoader, BadOptionsAndWorkerErrors) {
  TensorDataset ds = make_ds(4);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 0}), Error);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 2, .rank = 2, .world_size = 2}), Error);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 1, .world_size = 2}), Error);
  EXPECT_THROW(DataLoader(ds, {.batch_size = 2, .world_size = 2, .shard_weights = {1}}), Error);
  DataLoader dl(ds, {.batch_size = 2});
  EXPECT_THROW(dl.set_position({0, 5}), Error);
  TensorDataset bad(zeros({4, 1}), arange(4),
                    [](const Tensor&, Generator&) -> Tensor { throw Error("transform: broken example"); });
  DataLoader dlw(bad, {.batch_size = 2, .workers = 2});
  EXPECT_THROW(
      {
        for (auto& b : dlw) (void)b;
      },
      Error);
}

// FirstN: the first n examples, through the data set's own batch path, and nothing past them.
TEST(FirstN, TheFirstExamplesOnly) {
  auto all = std::make_unique<TensorDataset>(arange(0, 10, 1, {.dtype = DType::Float32}).reshape({10, 1}), arange(10));
  FirstN first(std::move(all), 4);
  EXPECT_EQ(first.size(), 4);
  DataLoader loader(first, {.batch_size = 3, .shuffle = false});
  std::vector<int64_t> seen;
  for (auto& [x, y] : loader)
    for (int64_t v : y.to_vector<int64_t>()) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
  Generator g(0);
  EXPECT_THROW(first.get(4, g), Error);
  EXPECT_THROW(first.get_batch({1, 4}, {&g, &g}), Error);
  // n past the end keeps all; a negative n is an error.
  EXPECT_EQ(FirstN(std::make_unique<TensorDataset>(zeros({3, 1}), zeros({3}, {.dtype = DType::Int64})), 9).size(), 3);
  EXPECT_THROW(FirstN(std::make_unique<TensorDataset>(zeros({3, 1}), zeros({3}, {.dtype = DType::Int64})), -1), Error);
}
