// Data-parallel fp16 with loss scaling: when one rank's gradients overflow, every rank skips that
// step and backs off its scale alike, so the replicas stay identical. The agreement comes from
// the gradient all-reduce: an inf or NaN in one rank's bucket makes the sum non-finite on every
// rank, and each rank's GradScaler then finds the same inf.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "dist/ddp.h"
#include "dist_test_util.h"
#include "layers/nn.h"
#include "layers/optim/grad_scaler.h"
#include "layers/optim/sgd.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using dist_test::gather;

namespace {

// This rank's parameters, flattened.
std::vector<double> flat_params(nn::Module& m) {
  std::vector<double> out;
  for (const Tensor& p : m.parameters()) {
    const auto v = p.to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

bool all_equal(const std::vector<double>& v) {
  for (double x : v)
    if (x != v[0]) return false;
  return true;
}

}  // namespace

TEST(Ddp, Fp16OverflowOnOneRankIsSkippedOnEveryRank) {
  ASSERT_GE(comm().size(), 2);
  manual_seed(51);
  nn::Linear net(8, 4);
  DistributedDataParallel ddp(net, comm());
  optim::SGD sgd(net.parameters(), {.lr = 0.05});
  optim::GradScaler scaler;  // 2^16 to start
  const bool last_rank = comm().rank() == comm().size() - 1;
  // Step 1 and 3: ordinary inputs everywhere. Step 2: the last rank's input is large enough that
  // its float16 weight gradient (x^T times the output gradient, 2^16 / 24 * 0.1 each) overflows,
  // while its forward (about 2e4 at most) stays finite; the other ranks' gradients stay finite.
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Generator g(1000 * static_cast<uint64_t>(step) + static_cast<uint64_t>(comm().rank()));
    Tensor x = randn({6, 8}, {}, &g);
    if (step == 2 && last_rank) x = mul(x, 2e3);
    const std::vector<double> before = flat_params(net);
    const double scale_before = scaler.get_scale();
    Tensor loss;
    {
      autocast ac(Device::cpu(), DType::Float16);
      Tensor out = ddp(x);
      loss = mul(mean(out), 0.1);  // mean runs in float32 under autocast
    }
    ASSERT_TRUE(std::isfinite(loss.item())) << "the loss itself is float32 and finite; only gradients overflow";
    scaler.scale(loss).backward();
    scaler.step(sgd);
    const bool stepped = !scaler.found_inf(sgd);
    scaler.update();
    sgd.zero_grad();

    const std::vector<double> all_stepped = gather(stepped ? 1.0 : 0.0), all_scales = gather(scaler.get_scale());
    EXPECT_TRUE(all_equal(all_stepped)) << "ranks disagree on skipping (rank " << comm().rank() << ")";
    EXPECT_TRUE(all_equal(all_scales)) << "ranks disagree on the scale (rank " << comm().rank() << ")";
    EXPECT_EQ(stepped, step != 2) << "rank " << comm().rank();
    EXPECT_EQ(scaler.get_scale(), step == 2 ? scale_before / 2 : scale_before);
    const std::vector<double> after = flat_params(net);
    if (step == 2) {
      EXPECT_EQ(after, before) << "a skipped step leaves the weights as they were";
    }
    // The replicas stay identical: every parameter equal on every rank.
    for (size_t i = 0; i < after.size(); ++i) ASSERT_TRUE(all_equal(gather(after[i]))) << "parameter element " << i;
  }
}
