// A fake device for the caching allocator's tests (caching_allocator_test.cpp and
// caching_allocator_pool_test.cpp): malloc'd memory up to a capacity, and events that complete only
// when the test says so or waits for them; and an allocator over one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/caching_allocator.h"

namespace test_util {

using ember::MemoryBackend;
using ember::StreamHandle;

// A device with `capacity` bytes whose events complete only when the test says so.
struct FakeDevice {
  size_t capacity = size_t{1} << 30;
  size_t used = 0;
  int allocs = 0, frees = 0, waits = 0;
  std::map<void*, size_t> live;
  std::map<int, bool> events;  // id -> done
  std::map<int, StreamHandle> event_stream;
  int next_event = 1;
};

class FakeBackend final : public MemoryBackend {
 public:
  explicit FakeBackend(FakeDevice* d) : d_(d) {}
  void* raw_alloc(size_t bytes) override {
    if (d_->used + bytes > d_->capacity) return nullptr;
    void* p = std::malloc(bytes);
    d_->used += bytes;
    d_->live[p] = bytes;
    ++d_->allocs;
    return p;
  }
  void raw_free(void* p) override {
    EXPECT_TRUE(d_->live.count(p)) << "freed a pointer the device never gave out";
    d_->used -= d_->live[p];
    d_->live.erase(p);
    ++d_->frees;
    std::free(p);
  }
  void* record_event(StreamHandle s) override {
    const int id = d_->next_event++;
    d_->events[id] = false;
    d_->event_stream[id] = s;
    return reinterpret_cast<void*>(static_cast<intptr_t>(id));
  }
  bool event_done(void* e) override { return d_->events.at(id(e)); }
  void wait_event(void* e) override {
    ++d_->waits;
    d_->events.at(id(e)) = true;  // waiting makes it complete
  }
  void destroy_event(void* e) override { d_->events.erase(id(e)); }
  std::string describe() override { return "fake device with " + std::to_string(d_->capacity) + " bytes"; }

 private:
  static int id(void* e) { return static_cast<int>(reinterpret_cast<intptr_t>(e)); }
  FakeDevice* d_;
};

// A caching allocator over a fresh fake device, what every test of the two files starts from.
struct FakeAllocator {
  FakeDevice dev;
  ember::CachingAllocator alloc{"fake:0", std::make_unique<FakeBackend>(&dev)};
};

}  // namespace test_util
