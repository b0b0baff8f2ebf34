// The gradient noise scale estimator (dist/noise_scale.h) against values worked by hand. Pure
// arithmetic: every rank of the MPI test program runs it alone.
#include "dist/noise_scale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ember::dist {
namespace {

// |G|^2 = 1 and tr(Sigma) = 32 give E|g_16|^2 = 1 + 32/16 = 3 and E|g_32|^2 = 1 + 32/32 = 2:
// the estimator must invert that exactly.
TEST(NoiseScale, OneSampleInvertsTheTwoBatchNorms) {
  const NoiseSample s = noise_sample(3.0, 16, 2.0, 32);
  EXPECT_DOUBLE_EQ(s.grad_sqr, 1.0);
  EXPECT_DOUBLE_EQ(s.trace, 32.0);
  NoiseScale n;
  n.add(s);
  ASSERT_TRUE(n.value().has_value());
  EXPECT_DOUBLE_EQ(*n.value(), 32.0);  // bias correction: one sample is its own average
}

// Two ranks of 8 and the mean over 16: |G|^2 = (16 * 1.5 - 8 * 2) / 8 = 1, tr = 0.5 / (1/8 - 1/16) = 8.
TEST(NoiseScale, TwoRanksOfEight) {
  const NoiseSample s = noise_sample(2.0, 8, 1.5, 16);
  EXPECT_DOUBLE_EQ(s.grad_sqr, 1.0);
  EXPECT_DOUBLE_EQ(s.trace, 8.0);
}

// Decay 0.5, samples (1, 32) then (3, 0): averages 1.75 and 8 over a weight of 0.75, so the
// noise scale is 8 / 1.75 = 32 / 7 (the ratio of the averages, not the average of the ratios).
TEST(NoiseScale, MovingAveragesAreDividedNotTheRatios) {
  NoiseScale n(0.5);
  n.add({1.0, 32.0});
  n.add({3.0, 0.0});
  EXPECT_DOUBLE_EQ(n.grad_sqr(), 1.75 / 0.75);
  EXPECT_DOUBLE_EQ(n.trace(), 8.0 / 0.75);
  ASSERT_TRUE(n.value().has_value());
  EXPECT_NEAR(*n.value(), 32.0 / 7.0, 1e-12);
  EXPECT_EQ(n.samples(), 2);
}

TEST(NoiseScale, NoEstimateWithoutSignal) {
  NoiseScale n;
  EXPECT_FALSE(n.value().has_value());    // no sample yet
  n.add(noise_sample(3.0, 16, 0.0, 32));  // |G|^2 = -3: noise only
  EXPECT_FALSE(n.value().has_value());
}

TEST(NoiseScale, BadInputsAreErrors) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(noise_sample(1, 0, 1, 2), Error);
  EXPECT_THROW(noise_sample(1, 4, 1, 4), Error);  // one rank: B == b
  EXPECT_THROW(noise_sample(nan, 4, 1, 8), Error);
  EXPECT_THROW(noise_sample(1, 4, -1, 8), Error);
  EXPECT_THROW(NoiseScale(1.0), Error);
}

}  // namespace
}  // namespace ember::dist
