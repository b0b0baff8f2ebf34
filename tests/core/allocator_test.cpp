// The CPU caching allocator: alignment, reuse, statistics.
#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "core/ops.h"
#include "core/sanitizers.h"

using namespace ember;

TEST(Allocator, BlocksAre64ByteAligned) {
  for (size_t n : {1u, 3u, 64u, 100u, 4097u, 3u << 20}) {
    DataPtr p = cpu_allocator()->allocate(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << n;
  }
  Tensor t = empty({3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Allocator, StatisticsTrackUseAndPeak) {
  Allocator* a = cpu_allocator();
  a->reset_peak();
  const AllocatorStats s0 = a->stats();
  {
    DataPtr p = a->allocate(1 << 20);
    EXPECT_GE(a->stats().in_use, s0.in_use + (1 << 20));
    EXPECT_GE(a->stats().peak, s0.in_use + (1 << 20));
    EXPECT_EQ(a->stats().allocations, s0.allocations + 1);
  }
  EXPECT_EQ(a->stats().in_use, s0.in_use);
  EXPECT_GE(a->stats().peak, s0.in_use + (1 << 20));
}

TEST(Allocator, FreedBlocksAreReused) {
#if EMBER_ASAN
  GTEST_SKIP() << "the cache is off under AddressSanitizer";
#endif
  Allocator* a = cpu_allocator();
  void* first;
  {
    DataPtr p = a->allocate(12345);
    first = p.get();
  }
  const int64_t os_before = a->stats().os_allocations;
  DataPtr q = a->allocate(12000);  // same bin
  EXPECT_EQ(q.get(), first);
  EXPECT_EQ(a->stats().os_allocations, os_before);
  EXPECT_GT(a->stats().allocations, 0);
  q.reset();
  a->empty_cache();
  EXPECT_EQ(a->stats().cached, 0);
}
