// The device caching allocator's rules, run against a fake device on the CPU: size classes,
// reuse per stream, record_stream holding blocks back until the other stream's event completes,
// out-of-memory flush-and-retry, the error message, and statistics.
#include "core/caching_allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "core/stream.h"
#include "fake_memory_backend.h"
#include "test_helpers.h"

using namespace ember;
using test_util::error_of;
using test_util::FakeAllocator;
using test_util::FakeBackend;
using test_util::FakeDevice;
using test_util::has;

namespace {

constexpr StreamHandle kCompute = 0x100, kCopy = 0x200;

}  // namespace

TEST(CachingAllocator, SizeClassesRoundUpByAtMostAQuarter) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 640u);  // 512 + 128
  EXPECT_EQ(CachingAllocator::size_class(1024), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1025), 1280u);
  EXPECT_EQ(CachingAllocator::size_class(1u << 20), 1u << 20);
  EXPECT_EQ(CachingAllocator::size_class((1u << 20) + 1), (1u << 20) + (1u << 18));
  for (size_t n = 1; n < (size_t{1} << 26); n = n * 3 + 7) {
    const size_t c = CachingAllocator::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, std::max<size_t>(512, n + n / 4)) << n;
    EXPECT_EQ(CachingAllocator::size_class(c), c) << "a class is its own class: " << n;
  }
}

TEST(CachingAllocator, FreedBlockIsReusedForTheSameClassAndStream) {
  FakeAllocator f;
  void* first;
  {
    DataPtr a = f.alloc.allocate(1000, kCompute);
    first = a.get();
  }
  EXPECT_EQ(f.dev.allocs, 1);
  EXPECT_EQ(f.alloc.stats().cached, 1024);
  DataPtr b = f.alloc.allocate(1020, kCompute);  // same class (1024)
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(f.dev.allocs, 1);
  EXPECT_EQ(f.alloc.stats().cached, 0);
  DataPtr c = f.alloc.allocate(3000, kCompute);  // another class: a new block
  EXPECT_NE(c.get(), first);
  EXPECT_EQ(f.dev.allocs, 2);
}

TEST(CachingAllocator, BlocksAreNotSharedBetweenStreams) {
  FakeAllocator f;
  void* p;
  {
    DataPtr a = f.alloc.allocate(4096, kCompute);
    p = a.get();
  }
  DataPtr b = f.alloc.allocate(4096, kCopy);
  EXPECT_NE(b.get(), p) << "a block freed on the compute stream went to the copy stream unsynchronised";
  DataPtr c = f.alloc.allocate(4096, kCompute);
  EXPECT_EQ(c.get(), p);
}

TEST(CachingAllocator, RecordStreamHoldsTheBlockUntilTheEventCompletes) {
  FakeAllocator f;
  DataPtr a = f.alloc.allocate(8192, kCompute);
  void* p = a.get();
  f.alloc.record_stream(p, kCopy);
  f.alloc.record_stream(p, kCompute);  // its own stream: nothing to wait for
  a.reset();
  ASSERT_EQ(f.dev.events.size(), 1u) << "one event, on the copy stream only";
  EXPECT_EQ(f.dev.event_stream.begin()->second, kCopy);
  EXPECT_EQ(f.alloc.detailed_stats().pending_blocks, 1);
  EXPECT_EQ(f.alloc.stats().cached, 8192);

  DataPtr b = f.alloc.allocate(8192, kCompute);
  EXPECT_NE(b.get(), p) << "reused while the copy stream may still use it";
  b.reset();
  f.dev.events.begin()->second = true;  // the copy stream's work is done
  DataPtr c = f.alloc.allocate(8192, kCompute);
  EXPECT_EQ(c.get(), p);
  EXPECT_TRUE(f.dev.events.empty()) << "the completed event was destroyed";
  EXPECT_EQ(f.alloc.detailed_stats().pending_blocks, 0);

  // A reused block starts with no other streams: freeing it now needs no event.
  c.reset();
  EXPECT_TRUE(f.dev.events.empty());
}

TEST(CachingAllocator, RecordStreamOnAForeignPointerIsAnError) {
  FakeAllocator f;
  int x = 0;
  const std::string msg = error_of([&] { f.alloc.record_stream(&x, kCopy); });
  EXPECT_TRUE(has(msg, "fake:0") && has(msg, "record_stream")) << msg;
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  FakeAllocator f;
  f.dev.capacity = 10000;
  {
    DataPtr a = f.alloc.allocate(4096, kCompute);
    DataPtr b = f.alloc.allocate(4096, kCopy);
    f.alloc.record_stream(b.get(), kCompute);
  }
  // 8192 bytes cached (one block pending on an event); 6000 (class 6144) does not fit beside them.
  EXPECT_EQ(f.alloc.stats().cached, 8192);
  DataPtr c = f.alloc.allocate(6000, kCompute);
  EXPECT_NE(c.get(), nullptr);
  const CachingAllocatorStats s = f.alloc.detailed_stats();
  EXPECT_EQ(s.oom_flushes, 1);
  EXPECT_EQ(s.os_frees, 2);
  EXPECT_EQ(s.cached, 0);
  EXPECT_EQ(s.pending_blocks, 0);
  EXPECT_EQ(f.dev.waits, 1) << "the pending block's event was waited for before freeing it";
  EXPECT_EQ(f.dev.used, 6144u);
}

TEST(CachingAllocator, OutOfMemoryErrorNamesAskedInUseAndCached) {
  FakeAllocator f;
  f.dev.capacity = 5000;
  DataPtr held = f.alloc.allocate(2048, kCompute);
  { DataPtr tmp = f.alloc.allocate(1024, kCompute); }
  const std::string msg = error_of([&] { (void)f.alloc.allocate(4000, kCompute); });
  EXPECT_TRUE(has(msg, "fake:0: out of memory allocating 4000 bytes")) << msg;
  EXPECT_TRUE(has(msg, "2048 bytes in use")) << msg;
  EXPECT_TRUE(has(msg, "1024 bytes were cached")) << msg;
  EXPECT_TRUE(has(msg, "fake device with 5000 bytes")) << msg;
  // The failed request left the allocator consistent: the held block is intact and more fits.
  EXPECT_EQ(f.alloc.stats().in_use, 2048);
  DataPtr small = f.alloc.allocate(1000, kCompute);
  EXPECT_NE(small.get(), nullptr);
}

TEST(CachingAllocator, StatisticsTrackInUsePeakCachedAndCounts) {
  FakeAllocator f;
  {
    DataPtr a = f.alloc.allocate(100, kCompute);   // 512
    DataPtr b = f.alloc.allocate(5000, kCompute);  // 5120
    const CachingAllocatorStats s = f.alloc.detailed_stats();
    EXPECT_EQ(s.in_use, 512 + 5120);
    EXPECT_EQ(s.requested_bytes, 5100);
    EXPECT_EQ(s.peak, 512 + 5120);
    EXPECT_EQ(s.allocations, 2);
    EXPECT_EQ(s.os_allocations, 2);
  }
  EXPECT_EQ(f.alloc.stats().in_use, 0);
  EXPECT_EQ(f.alloc.stats().cached, 512 + 5120);
  EXPECT_EQ(f.alloc.stats().peak, 512 + 5120);
  f.alloc.reset_peak();
  EXPECT_EQ(f.alloc.stats().peak, 0);
  // A training loop: the same sizes every step reach the device only in the first step.
  for (int step = 0; step < 50; ++step) {
    DataPtr x = f.alloc.allocate(100, kCompute);
    DataPtr y = f.alloc.allocate(5000, kCompute);
  }
  EXPECT_EQ(f.alloc.stats().os_allocations, 2);
  EXPECT_EQ(f.alloc.stats().allocations, 102);
  EXPECT_EQ(f.alloc.stats().peak, 512 + 5120);
}

TEST(CachingAllocator, EmptyCacheReturnsEveryFreeBlockButNotBlocksInUse) {
  FakeAllocator f;
  DataPtr kept = f.alloc.allocate(700, kCompute);
  {
    DataPtr a = f.alloc.allocate(2000, kCompute);
    DataPtr b = f.alloc.allocate(3000, kCopy);
    f.alloc.record_stream(a.get(), kCopy);
  }
  f.alloc.empty_cache();
  EXPECT_EQ(f.alloc.stats().cached, 0);
  EXPECT_EQ(f.dev.live.size(), 1u);
  EXPECT_EQ(f.dev.live.count(kept.get()), 1u);
  EXPECT_TRUE(f.dev.events.empty());
  kept.reset();
}

TEST(CachingAllocator, AllocateWithoutAStreamUsesTheCurrentStream) {
  FakeDevice dev;
  static StreamHandle current = kCompute;
  CachingAllocator alloc("fake:1", std::make_unique<FakeBackend>(&dev), [] { return current; });
  void* p;
  {
    DataPtr a = alloc.allocate(1 << 16);
    p = a.get();
  }
  current = kCopy;
  DataPtr b = alloc.allocate(1 << 16);
  EXPECT_NE(b.get(), p);
  current = kCompute;
  DataPtr c = alloc.allocate(1 << 16);
  EXPECT_EQ(c.get(), p);
}

TEST(Allocator, PinnedAllocatorFallsBackToTheCpuAllocator) {
  // Without a CUDA backend there is no page-locked memory; pinned buffers are ordinary ones. In a
  // CUDA build it is the CUDA backend's allocator, never null.
  Allocator* a = pinned_allocator();
  ASSERT_NE(a, nullptr);
  DataPtr p = a->allocate(256);
  EXPECT_NE(p.get(), nullptr);
}

// Several threads share one cache, as a training step's compute thread, data-loading threads and
// a communication thread share a device's: each allocates on its own stream and on a shared one,
// marks blocks as used on another stream, writes its own pattern into every block it holds and
// checks the pattern is still there before freeing it. A small device makes the out-of-memory
// flush-and-retry happen while the other threads allocate. Under ThreadSanitizer (CI's
// thread-sanitised pass runs this suite) any access outside the cache's lock is a reported race;
// everywhere, a block handed out twice at once shows as a clobbered pattern.
TEST(CachingAllocator, ThreadsShareOneCacheWithoutHandingABlockOutTwice) {
  FakeDevice dev;
  dev.capacity = size_t{8} << 20;
  CachingAllocator alloc{"fake:0", std::make_unique<FakeBackend>(&dev)};
  constexpr int kThreads = 4, kRounds = 400, kHeld = 4;
  std::atomic<int> clobbered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<std::pair<DataPtr, size_t>> held;
      const auto pattern = [t](size_t i) { return static_cast<unsigned char>(t * 37 + i * 11); };
      for (int round = 0; round < kRounds; ++round) {
        const size_t bytes = 256 + rng() % (256 << 10);
        const StreamHandle stream = rng() % 2 ? kCompute : StreamHandle{0x1000} + t;
        DataPtr p = alloc.allocate(bytes, stream);
        auto* c = static_cast<unsigned char*>(p.get());
        for (size_t i = 0; i < bytes; i += 97) c[i] = pattern(i);
        if (rng() % 4 == 0) alloc.record_stream(p.get(), kCopy);
        held.emplace_back(std::move(p), bytes);
        if (held.size() > kHeld || round == kRounds - 1) {
          for (auto& [q, n] : held) {
            const auto* d = static_cast<const unsigned char*>(q.get());
            for (size_t i = 0; i < n; i += 97)
              if (d[i] != pattern(i)) {
                ++clobbered;
                break;
              }
          }
          held.clear();
        }
        if (round % 100 == 99) (void)alloc.stats();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(clobbered.load(), 0) << "a block was handed to two holders at once";
  const CachingAllocatorStats s = alloc.detailed_stats();
  EXPECT_EQ(s.in_use, 0);
  EXPECT_GT(s.oom_flushes, 0) << "the device was meant to fill up so that flushes race with allocations";
  alloc.empty_cache();
  EXPECT_EQ(dev.used, 0u);
  EXPECT_TRUE(dev.live.empty());
}
