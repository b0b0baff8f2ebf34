// The caching allocator's private pools (what a CUDA graph's capture allocates from), against a
// fake device on the CPU: a captured step's blocks keep their addresses for every replay because
// nothing outside the pool gets them and nothing returns them to the device while the pool lives.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <vector>

#include "core/caching_allocator.h"
#include "fake_memory_backend.h"
#include "test_helpers.h"

using namespace ember;
using test_util::error_of;
using test_util::FakeAllocator;
using test_util::FakeDevice;
using test_util::has;

namespace {

constexpr StreamHandle kCapture = 0x100, kOther = 0x200;

}  // namespace

TEST(CachingAllocatorPool, CapturedBlocksAreNeverHandedOutsideThePool) {
  FakeAllocator f;
  const PoolId pool = f.alloc.create_pool();
  f.alloc.begin_pool(pool, kCapture);
  void* captured;
  {
    DataPtr a = f.alloc.allocate(4096, kCapture);  // a temporary of the captured step
    captured = a.get();
  }
  f.alloc.end_pool(kCapture);
  // The replay will write to `captured` again: ordinary work on the same stream and class must
  // not be given it, nor may empty_cache return it to the device.
  DataPtr outside = f.alloc.allocate(4096, kCapture);
  EXPECT_NE(outside.get(), captured);
  f.alloc.empty_cache();
  EXPECT_EQ(f.dev.live.count(captured), 1u) << "a live pool's block went back to the device";
  EXPECT_EQ(f.alloc.pool_bytes(pool), 4096);
}

TEST(CachingAllocatorPool, ReuseInsideThePoolFollowsTheCaptureOrder) {
  FakeAllocator f;
  const PoolId pool = f.alloc.create_pool();
  f.alloc.begin_pool(pool, kCapture);
  void* first;
  {
    DataPtr a = f.alloc.allocate(1000, kCapture);
    first = a.get();
  }
  DataPtr b = f.alloc.allocate(1000, kCapture);  // the capture's own later temporary
  EXPECT_EQ(b.get(), first);
  // Another stream allocating during the capture gets the general cache, not the pool.
  DataPtr c = f.alloc.allocate(1000, kOther);
  EXPECT_NE(c.get(), first);
  f.alloc.end_pool(kCapture);
  EXPECT_EQ(f.alloc.pool_bytes(pool), 1024);
  EXPECT_EQ(f.alloc.pool_bytes(0), 1024);
}

TEST(CachingAllocatorPool, ASecondCaptureIntoThePoolReusesItsFreeBlocks) {
  FakeAllocator f;
  const PoolId pool = f.alloc.create_pool();
  void* first;
  f.alloc.begin_pool(pool, kCapture);
  {
    DataPtr a = f.alloc.allocate(8192, kCapture);
    first = a.get();
  }
  f.alloc.end_pool(kCapture);
  f.alloc.begin_pool(pool, kCapture);
  DataPtr again = f.alloc.allocate(8192, kCapture);
  f.alloc.end_pool(kCapture);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(f.dev.allocs, 1);
}

TEST(CachingAllocatorPool, ReleasedPoolBlocksJoinTheGeneralCache) {
  FakeAllocator f;
  const PoolId pool = f.alloc.create_pool();
  f.alloc.begin_pool(pool, kCapture);
  void* freed_one;
  {
    DataPtr a = f.alloc.allocate(2048, kCapture);
    freed_one = a.get();
  }
  DataPtr held = f.alloc.allocate(50000, kCapture);  // e.g. the step's loss, still referenced
  void* held_ptr = held.get();
  f.alloc.end_pool(kCapture);
  f.alloc.release_pool(pool);
  DataPtr reuse = f.alloc.allocate(2048, kCapture);
  EXPECT_EQ(reuse.get(), freed_one) << "the released pool's free block stayed out of the general cache";
  held = DataPtr();  // freed after its pool was released: goes to the general cache
  f.alloc.empty_cache();
  EXPECT_EQ(f.dev.live.count(held_ptr), 0u) << "a block of a released pool was kept from the device";
  EXPECT_EQ(f.alloc.pool_bytes(pool), 0);
}

TEST(CachingAllocatorPool, MisuseIsRefusedWithTheReason) {
  FakeAllocator f;
  const PoolId pool = f.alloc.create_pool();
  EXPECT_TRUE(has(error_of([&] { f.alloc.begin_pool(pool + 7, kCapture); }), "is not a live private pool"));
  EXPECT_TRUE(has(error_of([&] { f.alloc.end_pool(kCapture); }), "allocates from no pool"));
  f.alloc.begin_pool(pool, kCapture);
  EXPECT_TRUE(has(error_of([&] { f.alloc.begin_pool(pool, kCapture); }), "already allocates from pool"));
  EXPECT_TRUE(has(error_of([&] { f.alloc.release_pool(pool); }), "still captures on stream"));
  DataPtr a = f.alloc.allocate(512, kCapture);
  EXPECT_TRUE(has(error_of([&] { f.alloc.record_stream(a.get(), kOther); }), "private pool"));
  f.alloc.end_pool(kCapture);
  f.alloc.release_pool(pool);
  EXPECT_TRUE(has(error_of([&] { f.alloc.begin_pool(pool, kCapture); }), "is not a live private pool"));
  EXPECT_TRUE(has(error_of([&] { f.alloc.release_pool(pool); }), "is not a live private pool"));
}
