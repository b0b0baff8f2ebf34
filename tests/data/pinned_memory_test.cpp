// The DataLoader's pinned-memory option: batches land in memory from the registered pinned host
// allocator, and without one (no CUDA) the option quietly uses ordinary memory.
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "core/pinned_allocator.h"
#include "core/ops.h"
#include "data/dataloader.h"

using namespace ember;
using namespace ember::data;

namespace {

// Stands in for the CUDA backend's page-locked allocator: remembers the blocks it handed out.
class RecordingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
    std::lock_guard<std::mutex> l(mu_);
    blocks_.insert(p);
    ++stats_.allocations;
    return DataPtr(p, [](void* q) { std::free(q); });
  }
  AllocatorStats stats() const override { return stats_; }
  void reset_peak() override {}
  void empty_cache() override {}
  bool owns(const void* p) {
    std::lock_guard<std::mutex> l(mu_);
    return blocks_.count(const_cast<void*>(p)) > 0;
  }

 private:
  std::mutex mu_;
  std::set<void*> blocks_;
  AllocatorStats stats_;
};

struct Registration {
  explicit Registration(Allocator* a) { register_pinned_host_allocator(a); }
  ~Registration() { register_pinned_host_allocator(nullptr); }
};

std::vector<std::vector<float>> batches(DataLoader& dl, RecordingAllocator* rec, bool expect_pinned) {
  std::vector<std::vector<float>> out;
  for (auto& [x, y] : dl) {
    if (rec) {
      EXPECT_EQ(rec->owns(x.storage()->ptr()), expect_pinned);
      EXPECT_EQ(rec->owns(y.storage()->ptr()), expect_pinned);
    }
    out.push_back(x.to_vector<float>());
  }
  return out;
}

}  // namespace

TEST(PinnedMemory, WithoutAPinnedAllocatorBatchesUseOrdinaryMemory) {
  ASSERT_EQ(pinned_host_allocator(), nullptr);
  TensorDataset ds(randn({10, 3}), arange(10));
  DataLoader plain(ds, {.batch_size = 4, .seed = 1});
  DataLoader pinned(ds, {.batch_size = 4, .workers = 2, .seed = 1, .pin_memory = true});
  EXPECT_FALSE(pinned.pins_memory());
  EXPECT_EQ(batches(plain, nullptr, false), batches(pinned, nullptr, false));
}

TEST(PinnedMemory, BatchesComeFromTheRegisteredAllocator) {
  RecordingAllocator rec;
  Registration reg(&rec);
  TensorDataset ds(randn({10, 3}), arange(10));
  DataLoader pinned(ds, {.batch_size = 4, .workers = 2, .seed = 1, .pin_memory = true});
  DataLoader plain(ds, {.batch_size = 4, .seed = 1});
  EXPECT_TRUE(pinned.pins_memory());
  EXPECT_FALSE(plain.pins_memory());
  auto a = batches(pinned, &rec, true);
  EXPECT_EQ(rec.stats().allocations, 6);  // inputs and targets of 3 batches
  EXPECT_EQ(a, batches(plain, &rec, false));
}
