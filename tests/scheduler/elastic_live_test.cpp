// The daemon's elastic jobs off the daemon: `--elastic MIN:MAX` parsed or refused naming the flag,
// and the goodput model an elastic job's reports give (elastic/live_job.h) against hand values.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/elastic/allocate.h"
#include "scheduler/elastic/live_job.h"

namespace ember::sched {
namespace {

TEST(ElasticFlag, ParsesMinAndMax) {
  const proto::ElasticRange r = parse_elastic("1:4", "--elastic");
  EXPECT_EQ(r.min(), 1);
  EXPECT_EQ(r.max(), 4);
  EXPECT_EQ(parse_elastic("2:2", "--elastic").max(), 2);
}

TEST(ElasticFlag, BadValuesAreErrorsNamingTheFlag) {
  for (const char* bad : {"0:2", "1:0", "3:2", "a:2", "1:b", "1", "", ":", "1:2:3", "1.5:2", "-1:2", "+1:2", " 1:2",
                          "1:99999999999999999999"}) {
    try {
      parse_elastic(bad, "--elastic");
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--elastic"), std::string::npos) << e.what();
    }
  }
}

TEST(ElasticFlag, ASpecWithABadRangeIsRefused) {
  proto::JobSpec s;
  s.set_command("/bin/true");
  s.mutable_elastic()->set_min(3);
  s.mutable_elastic()->set_max(2);
  EXPECT_THROW(validate_spec(s, "t.pbtxt"), Error);
  s.mutable_elastic()->set_min(1);
  validate_spec(s, "t.pbtxt");
  EXPECT_EQ(spec_devices(s), 1) << "an elastic job starts on its minimum";
  s.mutable_elastic()->set_max_batch(-1);
  EXPECT_THROW(validate_spec(s, "t.pbtxt"), Error);
  s.mutable_elastic()->set_max_batch(4096);
  validate_spec(s, "t.pbtxt");
}

// One report on 1 rank at batch 32, 10 steps/s: 320 samples/s; two ranks guessed at 640 with no
// noise scale (efficiency 1, learning rate x 2: the linear rule).
TEST(LiveJob, BeforeANoiseScaleLargerBatchesAreAssumedFree) {
  elastic::LiveJob j(1, 2);
  EXPECT_EQ(j.throughput(1), 0);
  j.report(1, 32, 10.0, std::nullopt);
  EXPECT_DOUBLE_EQ(j.throughput(1), 320);
  EXPECT_DOUBLE_EQ(j.throughput(2), 640);
  EXPECT_EQ(j.batch(2), 64);
  EXPECT_DOUBLE_EQ(j.lr_scale(2), 2.0);
  const std::vector<double> g = j.goodput_table();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[1], 320);
  EXPECT_DOUBLE_EQ(g[2], 640);
}

// Noise scale 96 at initial batch 32: var/sqr = 3, so a step at batch m (scale s = m/32) is worth
// the gain 4s / (3 + s) initial-batch steps, at efficiency 4 / (3 + s). Measured on two ranks at
// batch 64: 0.15 s a step, 0.05 s of it waiting for gradients, so 0.1 s of compute for 32 samples
// a device. At batch m on two ranks a step takes m/640 + 0.05 s, and the goodput
// m / (m/640 + 0.05) x 4 / (3 + m/32) = 81920 m / ((m + 32)(m + 96)) peaks at m = sqrt(32 x 96) =
// 55.4: among the even batches 32..64, 56 (342.97 against 342.92 at 54), learning rate x
// 4 x 1.75 / 4.75 = 1.4737. On three ranks (the two-rank wait, compute per device as measured):
// 960 m / (m + 48) x 128 / (m + 96), peak at sqrt(48 x 96) = 67.9, among multiples of 3: 69.
TEST(LiveJob, TheNoiseScaleAndTheWaitChooseTheBatch) {
  elastic::LiveJob j(1, 3);
  j.report(1, 32, 10.0, std::nullopt);
  j.report(2, 64, 1 / 0.15, 96.0, 0.05);
  EXPECT_EQ(j.batch(1), 32) << "one device: no wait to amortise, the initial batch is best";
  EXPECT_DOUBLE_EQ(j.lr_scale(1), 1.0);
  EXPECT_EQ(j.batch(2), 56);
  EXPECT_NEAR(j.lr_scale(2), 7.0 / 4.75, 1e-12);
  EXPECT_EQ(j.batch(3), 69);
  const std::vector<double> g = j.goodput_table();
  EXPECT_NEAR(g[1], 320, 1e-9);
  EXPECT_NEAR(g[2], 81920.0 * 56 / (88 * 152), 1e-9);
  EXPECT_NEAR(g[3], 122880.0 * 69 / (117 * 165), 1e-9);
  EXPECT_NEAR(j.throughput(2), 56 / (56 / 640.0 + 0.05), 1e-9);
  EXPECT_EQ(j.most_held(), 2);
}

// A noise scale of 3200 at initial batch 32 (var/sqr = 100), the two-rank step as above: the
// goodput 640 m / (m + 32) x 3232 / (3200 + m) peaks at m = sqrt(32 x 3200) = 320, five passes of
// the 64 the two devices held. Without a max_batch the batch stops at 64; with 200 it is 200 in
// four passes; with 1,000 it is 320 in five, at learning rate x 101 x 10 / 110. One device has no
// wait to amortise: the initial batch whatever the max_batch. A max_batch of 2^40 still finds the
// peak within the search's 2% steps (the batches near 320 are searched one by one).
TEST(LiveJob, AMaxBatchAboveWhatTheDevicesHeldIsReachedByAccumulating) {
  auto job = [](long max_batch) {
    elastic::LiveJob j(1, 2, max_batch);
    j.report(1, 32, 10.0, std::nullopt);
    j.report(2, 64, 1 / 0.15, 3200.0, 0.05);
    return j;
  };
  const elastic::LiveJob none = job(0), some = job(200), more = job(1000), huge = job(1L << 40);
  EXPECT_EQ(none.batch(2), 64);
  EXPECT_EQ(none.accumulate(2), 1);
  EXPECT_EQ(some.batch(2), 200);
  EXPECT_EQ(some.accumulate(2), 4);
  EXPECT_EQ(more.batch(2), 320);
  EXPECT_EQ(more.accumulate(2), 5);
  EXPECT_NEAR(more.lr_scale(2), 1010.0 / 110, 1e-12);
  EXPECT_NEAR(more.goodput_table()[2], 640.0 * 320 / 352 * 3232 / 3520, 1e-9);
  EXPECT_EQ(huge.batch(2), 320);
  for (const elastic::LiveJob* j : {&none, &some, &more, &huge}) {
    EXPECT_EQ(j->batch(1), 32);
    EXPECT_EQ(j->accumulate(1), 1);
  }
  EXPECT_THROW(elastic::LiveJob(1, 2, -1), Error);
}

// No wait reported on two ranks: every batch runs at the same samples a second, so the initial
// batch (the best efficiency) wins, at learning rate x 1.
TEST(LiveJob, WithoutAWaitTheInitialBatchIsBest) {
  elastic::LiveJob j(1, 2);
  j.report(1, 32, 10.0, std::nullopt);
  j.report(2, 64, 500.0 / 64, 96.0);
  EXPECT_EQ(j.batch(2), 32);
  EXPECT_DOUBLE_EQ(j.lr_scale(2), 1.0);
  EXPECT_NEAR(j.goodput_table()[2], 500, 1e-9);
}

// The allocator the simulator's goodput policy uses, with the daemon's requests: a rigid job of
// one device beside an elastic job whose two devices give a speedup of 1.5 (p = 0.5: values
// 2 sqrt(S)): the second device adds 2 (sqrt(1.5) - 1) = 0.45 to the elastic job and 2 to the
// rigid one, which gets it.
TEST(LiveJob, ARigidJobTakesADeviceFromAnElasticOne) {
  elastic::CountRequest e{.goodput = {0, 100, 150}, .held = 2, .most = 2};
  elastic::CountRequest r{.rigid = true, .gpus = 1, .most = 1};
  EXPECT_EQ(elastic::allocate_counts({e}, 2, 0.5, 8), (std::vector<int>{2}));
  EXPECT_EQ(elastic::allocate_counts({e, r}, 2, 0.5, 8), (std::vector<int>{1, 1}));
  e.goodput = {0, 100, 90};  // slower on two: one is enough even alone
  EXPECT_EQ(elastic::allocate_counts({e}, 2, 0.5, 8), (std::vector<int>{1}));
}

TEST(LiveJob, BadRangesAndReportsAreRefusedOrIgnored) {
  EXPECT_THROW(elastic::LiveJob(0, 2), Error);
  EXPECT_THROW(elastic::LiveJob(3, 2), Error);
  elastic::LiveJob j(1, 2);
  j.report(1, 32, std::nan(""), std::nullopt);
  j.report(1, 32, -1, std::nullopt);
  j.report(0, 32, 1, std::nullopt);
  EXPECT_EQ(j.throughput(1), 0) << "nothing learnt from reports that cannot be";
}

// What a restarted daemon gives back (JobInfo's ElasticLearned): the same batches, rates, noise
// scale and growth limit as the job that learned them.
TEST(LiveJob, ALearnedStateResumesAsTheJobThatLearnedIt) {
  elastic::LiveJob j(1, 3);
  j.report(1, 32, 10.0, std::nullopt);
  j.report(2, 64, 1 / 0.15, 96.0, 0.05);
  const elastic::LiveJob back(1, 3, 0, j.learned());
  for (int k = 1; k <= 3; ++k) {
    EXPECT_EQ(back.batch(k), j.batch(k)) << k;
    EXPECT_DOUBLE_EQ(back.lr_scale(k), j.lr_scale(k)) << k;
  }
  EXPECT_EQ(back.goodput_table(), j.goodput_table());
  EXPECT_EQ(back.most_held(), 2);
  EXPECT_EQ(back.noise_scale(), std::optional<double>(96.0));
}

// A damaged record loses what it got wrong, never yields a wrong batch or factor: batches that
// could not have been reported (the initial batch below the per-device one) drop the measurements
// with them; a measurement of an impossible count, batch or time drops alone; a negative noise
// scale is not one.
TEST(LiveJob, ADamagedLearnedStateKeepsOnlyWhatReportsCouldHaveGiven) {
  using M = elastic::LiveJob::Measured;
  elastic::LiveJob::Learned bad;
  bad.local = 32;
  bad.init_batch = 16;
  bad.at = {{1, M{32, 0.1, 0}}};
  bad.noise_scale = -5.0;
  bad.most_held = 9;
  const elastic::LiveJob a(1, 2, 0, bad);
  EXPECT_EQ(a.batch(2), 0);
  EXPECT_EQ(a.throughput(1), 0);
  EXPECT_FALSE(a.noise_scale());
  EXPECT_EQ(a.most_held(), 2) << "clamped to the job's maximum";
  bad.init_batch = 32;
  bad.at = {{0, M{32, 0.1, 0}}, {1, M{32, 0.1, 0}}, {2, M{64, std::nan(""), 0}}, {3, M{96, 0.1, 0}}};
  const elastic::LiveJob b(1, 2, 0, bad);
  EXPECT_EQ(b.batch(2), 64);
  EXPECT_TRUE(b.measured(1));
  EXPECT_FALSE(b.measured(2));
  EXPECT_FALSE(b.measured(3)) << "beyond the maximum of 2";
  EXPECT_DOUBLE_EQ(b.throughput(2), 640);
  bad.at = {{1, M{32, 0.1, 0.2}}, {2, M{1, 0.1, 0}}};  // a wait longer than its step; a batch below the count
  const elastic::LiveJob c(1, 2, 0, bad);
  EXPECT_FALSE(c.measured(1));
  EXPECT_FALSE(c.measured(2));
}

}  // namespace
}  // namespace ember::sched
