// Philox generator: known-answer vectors, determinism, independence, state save/restore and the
// distributions' basic statistics (fixed seeds, so these never flake).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/ops.h"
#include "core/philox.h"

using namespace ember;

TEST(Rng, PhiloxKnownAnswers) {
  // Random123's kat_vectors for philox4x32-10.
  Philox4x32 z = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(z.v[0], 0x6627e8d5u);
  EXPECT_EQ(z.v[1], 0xe169c58du);
  EXPECT_EQ(z.v[2], 0xbc57ac4cu);
  EXPECT_EQ(z.v[3], 0x9b00dbd8u);
  Philox4x32 f = philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(f.v[0], 0x408f276du);
  EXPECT_EQ(f.v[1], 0x41c83b0eu);
  EXPECT_EQ(f.v[2], 0xa20bc7c6u);
  EXPECT_EQ(f.v[3], 0x6d5451fdu);
  Philox4x32 p = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(p.v[0], 0xd16cfe09u);
  EXPECT_EQ(p.v[1], 0x94fdccebu);
  EXPECT_EQ(p.v[2], 0x5001e420u);
  EXPECT_EQ(p.v[3], 0x24126ea1u);
}

// Element i of a draw is a function of its own Philox block alone (core/philox.h; the CPU kernel
// computes blocks sixteen at a time): uniform and Bernoulli take block i/2 (one word per float32,
// two per float64), normal block i (Box-Muller), randint block i/2 (two words). Checked bit for bit
// against one block per element, across sizes that end inside a batch of blocks and cross the
// threads' ranges, from a fresh generator (offset 0) of a seed with both halves set.
TEST(Rng, EachElementIsThePhiloxBlockItNamesAlone) {
  const uint64_t seed = 0x0123456789abcdefull;
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 5001, 20000}) {
    Generator g1(seed), g2(seed), g3(seed), g4(seed), g5(seed), g6(seed);
    const std::vector<float> u = rand({n}, {}, &g1).to_vector<float>();
    const std::vector<double> ud = rand({n}, {.dtype = DType::Float64}, &g2).to_vector<double>();
    const std::vector<float> z = randn({n}, {}, &g3).to_vector<float>();
    const std::vector<double> zd = randn({n}, {.dtype = DType::Float64}, &g4).to_vector<double>();
    const std::vector<int64_t> k = randint(-5, 1000, {n}, {.dtype = DType::Int64}, &g5).to_vector<int64_t>();
    const std::vector<float> bern = bernoulli({n}, 0.3, {}, &g6).to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const Philox4x32 half = philox_block(seed, static_cast<uint64_t>(i / 2)), own = philox_block(seed, i);
      const int w = 2 * static_cast<int>(i % 2);
      ASSERT_EQ(u[i], uint_to_unit_float(half.v[w])) << "n " << n << " i " << i;
      ASSERT_EQ(ud[i], uints_to_unit_double(half.v[w], half.v[w + 1])) << "n " << n << " i " << i;
      const float u1 = uint_to_unit_float(own.v[0]), u2 = uint_to_unit_float(own.v[1]);
      ASSERT_EQ(z[i], std::sqrt(-2.0f * std::log(1.0f - u1)) * std::cos(6.2831853071795864f * u2)) << "i " << i;
      const double d1 = uints_to_unit_double(own.v[0], own.v[1]), d2 = uints_to_unit_double(own.v[2], own.v[3]);
      ASSERT_EQ(zd[i], std::sqrt(-2.0 * std::log(1.0 - d1)) * std::cos(2.0 * M_PI * d2)) << "i " << i;
      const uint64_t x = (static_cast<uint64_t>(half.v[w]) << 32) | half.v[w + 1];
      ASSERT_EQ(k[i], -5 + static_cast<int64_t>(x % 1005)) << "i " << i;
      ASSERT_EQ(bern[i], static_cast<double>(uint_to_unit_float(half.v[w])) < 0.3 ? 1.0f : 0.0f) << "i " << i;
    }
  }
}

TEST(Rng, SameSeedSameNumbers) {
  manual_seed(42);
  std::vector<float> a = randn({1000}).to_vector<float>();
  std::vector<float> a2 = rand({7}).to_vector<float>();
  manual_seed(42);
  EXPECT_EQ(randn({1000}).to_vector<float>(), a);
  EXPECT_EQ(rand({7}).to_vector<float>(), a2);
  manual_seed(43);
  EXPECT_NE(randn({1000}).to_vector<float>(), a);
}

TEST(Rng, GeneratorsAreIndependentOfEachOther) {
  Generator g1(7), g2(7);
  std::vector<float> x = rand({10}, {}, &g1).to_vector<float>();
  rand({100}, {}, &g2);  // advancing g2 or the default generator does not touch g1
  rand({100});
  std::vector<float> next = rand({10}, {}, &g1).to_vector<float>();
  Generator ref(7);
  rand({10}, {}, &ref);
  EXPECT_EQ(rand({10}, {}, &ref).to_vector<float>(), next);
  EXPECT_NE(next, x);
}

TEST(Rng, StreamDoesNotDependOnHowItIsCut) {
  // Element i depends only on (seed, offset, i): one draw of 10 equals its first 10 when drawing 20
  // from the same state, and the element layout makes the two halves line up with two draws.
  Generator g(99);
  std::vector<float> big = rand({20}, {}, &g).to_vector<float>();
  Generator h(99);
  std::vector<float> first = rand({10}, {}, &h).to_vector<float>();
  std::vector<float> second = rand({10}, {}, &h).to_vector<float>();
  EXPECT_TRUE(std::equal(first.begin(), first.end(), big.begin()));
  EXPECT_TRUE(std::equal(second.begin(), second.end(), big.begin() + 10));
}

TEST(Rng, StateSaveAndRestore) {
  Generator g(1234);
  rand({33}, {}, &g);
  GeneratorState s = g.state();
  std::vector<double> after = randn({17}, {.dtype = DType::Float64}, &g).to_vector<double>();
  Generator fresh(0);
  fresh.set_state(s);
  EXPECT_EQ(randn({17}, {.dtype = DType::Float64}, &fresh).to_vector<double>(), after);
  EXPECT_EQ(fresh.seed(), 1234u);
}

TEST(Rng, UniformAndNormalStatistics) {
  Generator g(5);
  std::vector<double> u = rand({100000}, {.dtype = DType::Float64}, &g).to_vector<double>();
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0);
  double mean = std::accumulate(u.begin(), u.end(), 0.0) / u.size();
  EXPECT_NEAR(mean, 0.5, 0.005);
  std::vector<float> n = randn({100000}, {}, &g).to_vector<float>();
  double m = 0, v = 0;
  for (float x : n) m += x;
  m /= n.size();
  for (float x : n) v += (x - m) * (x - m);
  v /= n.size();
  EXPECT_NEAR(m, 0.0, 0.02);
  EXPECT_NEAR(v, 1.0, 0.02);
  Tensor t = empty({1000}, {.dtype = DType::Float64});
  normal_(t, 5.0, 0.5, &g);
  std::vector<double> tv = t.to_vector<double>();
  double tm = std::accumulate(tv.begin(), tv.end(), 0.0);
  EXPECT_NEAR(tm / 1000, 5.0, 0.1);
  uniform_(t, -2, -1, &g);
  for (double x : t.to_vector<double>()) {
    EXPECT_GE(x, -2.0);
    EXPECT_LT(x, -1.0);
  }
}

TEST(Rng, IntegerBernoulliAndPermutation) {
  Generator g(11);
  std::vector<int64_t> r = randint(-3, 4, {10000}, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
  std::vector<int> counts(7, 0);
  for (int64_t x : r) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    counts[x + 3]++;
  }
  for (int c : counts) EXPECT_GT(c, 1200);
  std::vector<float> b = bernoulli({10000}, 0.3, {}, &g).to_vector<float>();
  double frac = std::accumulate(b.begin(), b.end(), 0.0) / b.size();
  EXPECT_NEAR(frac, 0.3, 0.02);
  std::vector<float> bp = bernoulli(tensor({0.0, 1.0, 0.0, 1.0}), &g).to_vector<float>();
  EXPECT_EQ(bp, (std::vector<float>{0, 1, 0, 1}));
  std::vector<int64_t> p = randperm(100, &g).to_vector<int64_t>();
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(p, sorted);
}

TEST(Rng, FillsNonContiguousViews) {
  Generator g(3);
  Tensor t = zeros({4, 4});
  Tensor v = t.t();
  uniform_(v, 1.0, 2.0, &g);
  for (float x : t.to_vector<float>()) EXPECT_GE(x, 1.0f);
}

TEST(Rng, BadArguments) {
  EXPECT_THROW(randint(5, 5, {2}), Error);
  EXPECT_THROW(bernoulli({2}, 1.5), Error);
  EXPECT_THROW(bernoulli(tensor({0.5, 2.0})), Error);
  EXPECT_THROW(rand({2}, {.dtype = DType::Int32}), Error);
  Tensor t = zeros({2});
  EXPECT_THROW(normal_(t, 0.0, -1.0), Error);
  EXPECT_THROW(uniform_(t, 2.0, 1.0), Error);
}
