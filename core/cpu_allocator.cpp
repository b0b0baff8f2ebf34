#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/sanitizers.h"

namespace ember {

namespace {

constexpr size_t kAlign = 64;
// Blocks above this stay cached only while the cache is below kMaxCached; beyond it they go back
// to the system so that a one-off huge tensor does not pin memory for the life of the process.
constexpr size_t kMaxCached = size_t{2} << 30;

bool caching_disabled() {
  if (EMBER_ASAN) return true;  // reuse would hide use-after-free and overflows from AddressSanitizer
  const char* env = std::getenv("EMBER_CPU_CACHE");
  return env && std::string(env) == "0";
}

// Rounds a request to its bin: powers of two up to 1 MiB, then multiples of 1 MiB, so that
// reuse is likely and waste stays below 50% (small) or 1 MiB (large).
size_t bin_size(size_t n) {
  if (n == 0) return kAlign;
  if (n <= (size_t{1} << 20)) {
    size_t b = kAlign;
    while (b < n) b <<= 1;
    return b;
  }
  const size_t mb = size_t{1} << 20;
  return (n + mb - 1) / mb * mb;
}

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : no_cache_(caching_disabled()) {}
  ~CpuAllocator() override { empty_cache(); }

  DataPtr allocate(size_t nbytes) override {
    size_t size = no_cache_ ? (nbytes + kAlign - 1) / kAlign * kAlign : bin_size(nbytes);
    if (size == 0) size = kAlign;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.allocations;
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        stats_.cached -= static_cast<int64_t>(size);
      }
    }
    if (!p) {
      p = std::aligned_alloc(kAlign, size);
      if (!p) {
        empty_cache();
        p = std::aligned_alloc(kAlign, size);
      }
      EMBER_CHECK(p, "cpu allocator: out of memory allocating ", nbytes, " bytes (", stats().in_use, " bytes in use)");
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.os_allocations;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.in_use += static_cast<int64_t>(size);
      if (stats_.in_use > stats_.peak) stats_.peak = stats_.in_use;
    }
    return DataPtr(p, [this, size](void* q) { release(q, size); });
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak = stats_.in_use;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    stats_.cached = 0;
  }

 private:
  void release(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.in_use -= static_cast<int64_t>(size);
    if (no_cache_ || stats_.cached + static_cast<int64_t>(size) > static_cast<int64_t>(kMaxCached)) {
      std::free(p);
      return;
    }
    free_[size].push_back(p);
    stats_.cached += static_cast<int64_t>(size);
  }

  const bool no_cache_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

Allocator* g_allocators[kNumDeviceTypes] = {};
Allocator* (*g_allocator_fns[kNumDeviceTypes])(int) = {};
Allocator* g_pinned = nullptr;

}  // namespace

Allocator* cpu_allocator() {
  // Leaked on purpose: tensors with static storage duration may be freed after main returns.
  static CpuAllocator* a = new CpuAllocator();
  return a;
}

void register_allocator(DeviceType t, Allocator* a) {
  g_allocators[static_cast<int>(t)] = a;
}

Allocator* get_allocator(Device d) {
  if (d.is_cpu()) return g_allocators[0] ? g_allocators[0] : cpu_allocator();
  if (auto fn = g_allocator_fns[static_cast<int>(d.type)]) return fn(d.index);
  Allocator* a = g_allocators[static_cast<int>(d.type)];
  EMBER_CHECK(a || !d.is_emulated(), "device emu: the emulated device exists only in programs that link the kernel ",
              "emulator (the tests)");
  EMBER_CHECK(a, "device ", d, ": no allocator registered (was Ember built with CUDA?)");
  return a;
}

void register_allocator_fn(DeviceType t, Allocator* (*fn)(int index)) {
  g_allocator_fns[static_cast<int>(t)] = fn;
}

void register_pinned_allocator(Allocator* a) {
  g_pinned = a;
}

Allocator* pinned_allocator() {
  return g_pinned ? g_pinned : cpu_allocator();
}

}  // namespace ember
