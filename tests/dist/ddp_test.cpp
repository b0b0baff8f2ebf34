// DistributedDataParallel on real ranks: K training steps of the MNIST CNN data-parallel (equal and
// unequal batch shares) end with the parameters one process gets on the global batch; buckets
// all-reduce while backward runs, in the same order on every rank; no_sync accumulates; unused
// parameters are reported or allowed; buffers are synchronised; models that differ are refused.
#include "dist/ddp.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "core/autograd/grad_mode.h"
#include "dist/ddp_split.h"
#include "dist_test_util.h"
#include "layers/nn.h"
#include "models/mnist_cnn.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using test_util::error_of;
using test_util::has;

namespace {

// Small buckets so that even this model is split into several.
DdpOptions small_buckets() {
  DdpOptions o;
  o.first_bucket_cap_mb = 0.02;
  o.bucket_cap_mb = 0.1;
  return o;
}

struct Batch {
  Tensor x, y;
};
Batch global_batch(int64_t n, uint64_t seed) {
  Generator g(seed);
  return {randn({n, 1, 28, 28}, {}, &g), randint(0, 10, {n}, {.dtype = DType::Int64}, &g)};
}

double max_param_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<double>(), vb = pb[i].to_vector<double>();
    for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
  }
  return worst;
}

// K steps of SGD with momentum, data-parallel with the given shares, and the serial reference.
// set_to_none: how the gradients are cleared between steps (false: zeroed in place, so with
// gradient_as_bucket_view backward accumulates straight into the buckets).
void check_equivalence(const std::vector<double>& weights, DdpOptions opts = small_buckets(), bool set_to_none = true) {
  const int64_t global = 12;
  const int steps = 3;
  manual_seed(100 + static_cast<uint64_t>(comm().rank()));  // different initial weights per rank...
  models::MnistCnn net;
  DistributedDataParallel ddp(net, comm(), opts);  // ...until DDP copies rank 0's
  ASSERT_GE(ddp.bucket_layout().size(), 3u);
  manual_seed(100);  // rank 0's initial weights, for the reference
  models::MnistCnn ref;
  ASSERT_EQ(max_param_diff(net, ref), 0.0) << "DDP did not start from rank 0's parameters";
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.05, .momentum = 0.9});
  BatchSplitter split(comm(), global);
  if (!weights.empty()) split.set_weights(weights);
  int64_t total = 0;
  for (int64_t s : split.shares()) total += s;
  ASSERT_EQ(total, global);
  for (int s = 0; s < steps; ++s) {
    Batch b = global_batch(global, 7 + static_cast<uint64_t>(s));
    Tensor x = b.x.narrow(0, split.local_offset(), split.local_share());
    Tensor y = b.y.narrow(0, split.local_offset(), split.local_share());
    opt.zero_grad(set_to_none);
    Tensor loss = cross_entropy(ddp(x), y).mul_(split.loss_weight());
    loss.backward();
    opt.step();
    ref_opt.zero_grad();
    cross_entropy(ref(b.x), b.y).backward();
    ref_opt.step();
  }
  EXPECT_EQ(ddp.steps_synchronized(), steps);
  double diff = max_param_diff(net, ref);
  EXPECT_LT(diff, 2e-5) << "rank " << comm().rank();
  // And the parameters moved (a test of nothing would pass trivially).
  manual_seed(100);
  models::MnistCnn init;
  EXPECT_GT(max_param_diff(net, init), 1e-3);
}

}  // namespace

TEST(Ddp, EqualSharesMatchOneProcessOnTheGlobalBatch) {
  check_equivalence({});
}

TEST(Ddp, UnequalSharesMatchOneProcessOnTheGlobalBatch) {
  std::vector<double> w;
  for (int r = 0; r < comm().size(); ++r) w.push_back(r + 1.0);  // 4/8 on 2 ranks, 2/4/6 on 3
  check_equivalence(w);
}

TEST(Ddp, GradientsAsBucketViewsMatchOneProcessAndLiveInTheBuckets) {
  DdpOptions o = small_buckets();
  o.gradient_as_bucket_view = true;
  std::vector<double> w;
  for (int r = 0; r < comm().size(); ++r) w.push_back(r + 1.0);
  check_equivalence({}, o, /*set_to_none=*/true);
  check_equivalence(w, o, /*set_to_none=*/false);

  // The gradients of one bucket are consecutive views of one buffer, at the same addresses every
  // step (no copy, no allocation), and zero_grad(false) then backward accumulates into them.
  manual_seed(4);
  models::MnistCnn net;
  DistributedDataParallel ddp(net, comm(), o);
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : net.named_parameters()) params[name] = p;
  Batch b = global_batch(4, 9);
  auto step = [&] {
    for (auto& [name, p] : params) {
      NoGradGuard ng;
      if (p.grad().defined()) p.grad().zero_();
    }
    cross_entropy(ddp(b.x), b.y).backward();
  };
  step();
  std::map<std::string, const void*> where;
  for (auto& [name, p] : params) where[name] = p.grad().raw_data();
  for (const auto& bucket : ddp.bucket_layout()) {
    auto at = static_cast<const char*>(where[bucket.params[0]]);
    for (const auto& name : bucket.params) {
      EXPECT_EQ(where[name], at) << name << " is not where its bucket puts it";
      at += params[name].numel() * static_cast<int64_t>(params[name].itemsize());
    }
  }
  std::map<std::string, std::vector<double>> first;
  for (auto& [name, p] : params) first[name] = p.grad().to_vector<double>();
  step();  // the same batch again: the same averaged gradients, in the same memory
  for (auto& [name, p] : params) {
    EXPECT_EQ(p.grad().raw_data(), where[name]) << name << " moved";
    auto again = p.grad().to_vector<double>();
    double worst = 0;
    for (size_t j = 0; j < again.size(); ++j) worst = std::max(worst, std::abs(again[j] - first[name][j]));
    EXPECT_LT(worst, 1e-6) << name;
  }
}

TEST(Ddp, BucketsLaunchDuringBackwardInTheSameOrderEverywhere) {
  manual_seed(3);
  models::MnistCnn net;
  DistributedDataParallel ddp(net, comm(), small_buckets());
  auto layout = ddp.bucket_layout();
  // Reverse registration order: the last layer's parameters come first.
  EXPECT_EQ(layout.front().params.front(), "f2.bias");
  EXPECT_EQ(layout.back().params.back(), "c1.weight");
  Batch b = global_batch(8, 1);
  cross_entropy(ddp(b.x), b.y).backward();
  const DdpTimeline& tl = ddp.last_timeline();
  ASSERT_EQ(tl.buckets.size(), layout.size());
  for (size_t i = 0; i < tl.buckets.size(); ++i) {
    EXPECT_EQ(tl.buckets[i].index, static_cast<int>(i));
    EXPECT_LE(tl.buckets[i].launched, tl.buckets[i].finished);
    EXPECT_LE(tl.buckets[i].finished, tl.synchronized);
  }
  // The first buckets were on the wire before the last gradient was computed.
  EXPECT_LT(tl.buckets.front().launched, tl.last_grad);
  EXPECT_LE(tl.first_grad, tl.buckets.front().launched);
  // Same layout (and so the same launch order) on every rank.
  double sig = 0;
  for (size_t i = 0; i < layout.size(); ++i) sig = sig * 31 + static_cast<double>(layout[i].numel % 9973);
  for (double v : dist_test::gather(sig)) EXPECT_EQ(v, sig);

  // With overlap off nothing starts before backward has produced every gradient.
  manual_seed(3);
  models::MnistCnn net2;
  DdpOptions o = small_buckets();
  o.overlap = false;
  DistributedDataParallel late(net2, comm(), o);
  cross_entropy(late(b.x), b.y).backward();
  for (const auto& bt : late.last_timeline().buckets) EXPECT_GE(bt.launched, late.last_timeline().last_grad);
  EXPECT_EQ(late.last_timeline().buckets.size(), layout.size());
  // Same gradients either way.
  auto g1 = net.parameters(), g2 = net2.parameters();
  for (size_t i = 0; i < g1.size(); ++i) {
    auto a = g1[i].grad().to_vector<float>(), c = g2[i].grad().to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) ASSERT_FLOAT_EQ(a[j], c[j]);
  }
}

TEST(Ddp, NoSyncAccumulatesAndTheNextBackwardReducesTheSum) {
  const int64_t global = 4 * comm().size();
  manual_seed(5);
  models::MnistCnn net;
  DistributedDataParallel ddp(net, comm(), small_buckets());
  manual_seed(5);
  models::MnistCnn ref;
  BatchSplitter split(comm(), global);
  Batch a = global_batch(global, 11), b = global_batch(global, 12);
  auto local = [&](const Tensor& t) { return t.narrow(0, split.local_offset(), split.local_share()); };
  {
    auto guard = ddp.no_sync();
    cross_entropy(ddp(local(a.x)), local(a.y)).backward();
  }
  EXPECT_EQ(ddp.steps_synchronized(), 0);
  EXPECT_TRUE(ddp.last_timeline().buckets.empty());
  // Not yet reduced: this rank's own gradient differs from the global one.
  cross_entropy(ddp(local(b.x)), local(b.y)).backward();
  EXPECT_EQ(ddp.steps_synchronized(), 1);
  cross_entropy(ref(a.x), a.y).backward();
  cross_entropy(ref(b.x), b.y).backward();
  auto p = net.parameters(), q = ref.parameters();
  double worst = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    auto u = p[i].grad().to_vector<double>(), v = q[i].grad().to_vector<double>();
    for (size_t j = 0; j < u.size(); ++j) worst = std::max(worst, std::abs(u[j] - v[j]));
  }
  EXPECT_LT(worst, 1e-5);
}

namespace {
struct TwoHeads : nn::Module {
  nn::Linear used{4, 3}, unused{4, 3};
  bool use_both = false;
  TwoHeads() { register_modules({{"used", &used}, {"unused", &unused}}); }
  Tensor forward(const Tensor& x) override { return use_both ? used(x) + unused(x) : used(x); }
};
}  // namespace

TEST(Ddp, UnusedParametersAreNamedOrAllowed) {
  manual_seed(9);
  TwoHeads m;
  DistributedDataParallel ddp(m, comm());
  Tensor x = ones({2, 4});
  std::string msg = error_of([&] { ddp(x); });
  EXPECT_TRUE(has(msg, "parameters not used to compute the outputs: unused.bias, unused.weight")) << msg;
  EXPECT_TRUE(has(msg, "find_unused_parameters")) << msg;

  TwoHeads m2;
  DdpOptions o;
  o.find_unused_parameters = true;
  DistributedDataParallel allow(m2, comm(), o);
  // Rank 0 uses both heads, the others one: the unused head's gradient is rank 0's / size.
  m2.use_both = comm().rank() == 0;
  Tensor xr = full({2, 4}, 1.0);
  allow(xr).sum().backward();
  EXPECT_EQ(allow.steps_synchronized(), 1);
  auto gw = m2.unused.weight.grad().to_vector<double>();
  for (double v : gw) EXPECT_NEAR(v, 2.0 / comm().size(), 1e-6);
  auto gu = m2.used.weight.grad().to_vector<double>();
  for (double v : gu) EXPECT_NEAR(v, 2.0, 1e-6);
}

// Unused parameters join the reduction when backward starts, not at forward: with bucket views
// their .grad is a bucket slot, and clearing gradients in place between forward and backward
// must not write into a bucket whose all-reduce is already running.
TEST(Ddp, UnusedParametersJoinWhenBackwardStarts) {
  manual_seed(9);
  TwoHeads m;  // every rank uses only the first head
  DdpOptions o;
  o.find_unused_parameters = true;
  o.gradient_as_bucket_view = true;
  o.first_bucket_cap_mb = o.bucket_cap_mb = 1e-6;  // one parameter per bucket, the unused ones first
  DistributedDataParallel ddp(m, comm(), o);
  ddp(ones({2, 4})).sum().backward();  // every .grad is now a view of its bucket
  Tensor out = ddp(ones({2, 4}));
  for (auto& p : m.parameters()) {
    NoGradGuard ng;
    p.grad().zero_();
  }
  auto backward_starts = Clock::now();
  out.sum().backward();
  EXPECT_EQ(ddp.steps_synchronized(), 2);
  const auto& tl = ddp.last_timeline();
  ASSERT_EQ(tl.buckets.size(), 4u);
  for (const auto& b : tl.buckets)
    EXPECT_GE(b.launched, backward_starts) << "bucket " << b.index << " launched at forward";
  for (double v : m.unused.weight.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
  for (double v : m.used.weight.grad().to_vector<double>()) EXPECT_NEAR(v, 2.0, 1e-6);
}

namespace {
struct WithBuffer : nn::Module {
  nn::Linear lin{2, 2};
  Tensor stat;
  WithBuffer() {
    register_module("lin", &lin);
    register_buffer("stat", &stat);
    stat = full({3}, 0.0);
  }
  Tensor forward(const Tensor& x) override { return lin(x); }
};
}  // namespace

TEST(Ddp, BuffersAreBroadcastOrAveraged) {
  int k = comm().size();
  for (BufferSync mode : {BufferSync::Broadcast, BufferSync::Average, BufferSync::None}) {
    WithBuffer m;
    DdpOptions o;
    o.buffer_sync = mode;
    DistributedDataParallel ddp(m, comm(), o);  // broadcasts buffers once, whatever the mode
    m.stat.fill_(10.0 * comm().rank());
    ddp(ones({1, 2})).sum().backward();
    double want = mode == BufferSync::Broadcast ? 0.0
                  : mode == BufferSync::Average ? 10.0 * (k - 1) / 2.0
                                                : 10.0 * comm().rank();
    for (double v : m.stat.to_vector<double>()) EXPECT_NEAR(v, want, 1e-9);
  }
}

TEST(Ddp, DifferentModelsAreRefusedOnEveryRank) {
  std::shared_ptr<nn::Module> m;
  if (comm().rank() == 1)
    m = nn::make<nn::Linear>(4, 5);
  else
    m = nn::make<nn::Linear>(4, 4);
  std::string msg = error_of([&] { DistributedDataParallel ddp(*m, comm()); });
  EXPECT_TRUE(has(msg, "rank 1's model differs from rank 0's")) << msg;
}

// A communicator that moves tensors of another device than the model's (NCCL's cuda:0 here, with
// no GPU needed: the reducer must refuse before any collective).
class OtherDeviceComm final : public Communicator {
 public:
  int rank() const override { return comm().rank(); }
  int size() const override { return comm().size(); }
  int local_rank() const override { return comm().local_rank(); }
  int local_size() const override { return comm().local_size(); }
  std::string backend() const override { return "fake-nccl"; }
  Device device() const override { return Device::cuda(0); }
  WorkPtr all_reduce(Tensor, ReduceOp, std::string) override { return fail(); }
  WorkPtr broadcast(Tensor, int, std::string) override { return fail(); }
  WorkPtr all_gather(Tensor, Tensor, std::string) override { return fail(); }
  WorkPtr reduce_scatter(Tensor, Tensor, ReduceOp, std::string) override { return fail(); }
  WorkPtr send(Tensor, int, int) override { return fail(); }
  WorkPtr recv(Tensor, int, int) override { return fail(); }
  WorkPtr barrier(std::string) override { return fail(); }

 private:
  static WorkPtr fail() {
    ADD_FAILURE() << "a collective ran on a communicator of another device";
    throw Error("unexpected collective");
  }
};

TEST(Ddp, AModelOnAnotherDeviceThanTheCommunicatorsIsRefused) {
  EXPECT_EQ(comm().device(), Device::cpu());
  nn::Linear lin(3, 2);
  OtherDeviceComm other;
  std::string msg = error_of([&] { DistributedDataParallel d(lin, other); });
  EXPECT_TRUE(has(msg, "'weight' is on cpu but the fake-nccl communicator moves tensors on cuda:0")) << msg;
  EXPECT_TRUE(has(msg, "module.to(device)")) << msg;
}

TEST(Ddp, OptionErrors) {
  nn::Linear lin(2, 2);
  DdpOptions o;
  o.bucket_cap_mb = 0;
  EXPECT_TRUE(has(error_of([&] { DistributedDataParallel d(lin, comm(), o); }), "bucket_cap_mb"));
  nn::Linear frozen(2, 2);
  for (auto& p : frozen.parameters()) p.requires_grad_(false);
  EXPECT_TRUE(has(error_of([&] { DistributedDataParallel d(frozen, comm()); }), "no parameter that requires"));
}

TEST(BatchSplit, SharesAreIntegersSummingToTheBatch) {
  EXPECT_EQ(BatchSplitter::shares_for(10, {1, 1}), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(BatchSplitter::shares_for(10, {1, 1, 1}), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(BatchSplitter::shares_for(12, {1, 2, 3}), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(BatchSplitter::shares_for(3, {1, 1000, 1}), (std::vector<int64_t>{1, 1, 1}));  // one each at least
  EXPECT_EQ(BatchSplitter::shares_for(64, {3, 1}), (std::vector<int64_t>{48, 16}));
  EXPECT_TRUE(has(error_of([] { BatchSplitter::shares_for(2, {1, 1, 1}); }), "cannot give each of 3"));
  EXPECT_TRUE(has(error_of([] { BatchSplitter::shares_for(8, {1, -1}); }), "positive"));
  EXPECT_TRUE(has(error_of([] { BatchSplitter(comm(), 1); }), "at least one example per rank"));
  BatchSplitter s(comm(), 10);
  EXPECT_TRUE(has(error_of([&] { s.set_weights({1}); }), "one weight per rank"));
}

TEST(BatchSplit, TheSlowerRankGetsFewerExamples) {
  BatchSplitter s(comm(), 60, {.speed_weighted = true, .measure_steps = 2, .remeasure_every = 0});
  EXPECT_EQ(s.local_share(), 60 / comm().size());  // equal until measured
  bool changed = false;
  for (int step = 0; step < 4; ++step) {
    s.begin_compute();
    // Rank 1 works 4x as long per example as the others.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(comm().rank() == 1 ? 8 * s.local_share() : 2 * s.local_share()));
    s.end_compute();
    changed |= s.end_step();
  }
  EXPECT_TRUE(changed);
  const auto& sh = s.shares();
  for (int r = 0; r < comm().size(); ++r) {
    if (r == 1) continue;
    EXPECT_GT(sh[static_cast<size_t>(r)], sh[1] * 2) << "rank " << r;
  }
  double w = 0;
  for (double v : dist_test::gather(s.loss_weight())) w += v;
  EXPECT_NEAR(w, comm().size(), 1e-12);  // the weights average to one
}
