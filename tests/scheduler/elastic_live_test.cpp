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

// Noise scale 96 at initial batch 32: var/sqr = 3, so at batch 64 (scale 2) the gain is
// (3 + 1) / (3/2 + 1) = 1.6 and the efficiency 0.8. Measured: 500 samples/s on two ranks.
TEST(LiveJob, TheNoiseScaleSetsTheGainAndTheEfficiency) {
  elastic::LiveJob j(1, 3);
  j.report(1, 32, 10.0, std::nullopt);
  j.report(2, 64, 500.0 / 64, 96.0);
  EXPECT_DOUBLE_EQ(j.lr_scale(1), 1.0);
  EXPECT_DOUBLE_EQ(j.lr_scale(2), 1.6);
  const std::vector<double> g = j.goodput_table();
  EXPECT_DOUBLE_EQ(g[1], 320);
  EXPECT_NEAR(g[2], 500 * 0.8, 1e-9);
  // Three ranks: the nearest measured count below, scaled (750 samples/s), at gain
  // (3 + 1) / (1 + 1) = 2 for scale 3: efficiency 2/3.
  EXPECT_NEAR(g[3], 750 * 2.0 / 3.0, 1e-9);
  EXPECT_EQ(j.most_held(), 2);
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

}  // namespace
}  // namespace ember::sched
