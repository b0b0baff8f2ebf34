#include "core/cuda/emu/guarded_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/cuda/emu/profile.h"
#include "core/sanitizers.h"

namespace ember::emu {
namespace {

constexpr bool address_sanitizer() {
  return EMBER_ASAN;
}

constexpr size_t guard_bytes() {
  return address_sanitizer() ? 0 : GuardedAllocator::kGuardBytes;
}

}  // namespace

GuardedAllocator::GuardedAllocator(std::string label) : label_(std::move(label)) {}

DataPtr GuardedAllocator::allocate(size_t nbytes) {
  const size_t g = guard_bytes();
  // Exact size under ASan (a zero-byte block still gets one byte so that it has an address); malloc
  // aligns to 16 bytes, enough for the kernels' 16-byte vector loads.
  const size_t total = g ? nbytes + 2 * g : (nbytes == 0 ? 1 : nbytes);
  // (GuardedAllocator::kGuardBytes, not g, as the alignment: under ASan g is a constant 0, which
  // clang rightly refuses as an alignment even in the branch that never runs.)
  constexpr size_t align = GuardedAllocator::kGuardBytes;
  auto* base = static_cast<unsigned char*>(g ? std::aligned_alloc(align, (total + align - 1) / align * align)
                                             : std::malloc(total));
  if (!base) throw std::bad_alloc();
  if (g) {
    std::memset(base, kGuardByte, g);
    std::memset(base + g + nbytes, kGuardByte, g);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.in_use += static_cast<int64_t>(nbytes);
    stats_.peak = std::max(stats_.peak, stats_.in_use);
    ++stats_.allocations;
    ++stats_.os_allocations;
  }
  // The efficiency counters count accesses to these blocks as global memory.
  emu::profile::detail::device_allocated(base + g, nbytes);
  return DataPtr(base + g,
                 [this, nbytes](void* p) { release(static_cast<unsigned char*>(p) - guard_bytes(), nbytes); });
}

void GuardedAllocator::release(unsigned char* base, size_t nbytes) {
  const size_t g = guard_bytes();
  emu::profile::detail::device_freed(base + g);
  std::string bad;
  for (size_t i = 0; i < g && bad.empty(); ++i)
    if (base[i] != kGuardByte)
      bad = label_ + ": a block of " + std::to_string(nbytes) + " bytes was written " + std::to_string(g - i) +
            " bytes before its start";
  for (size_t i = 0; i < g && bad.empty(); ++i)
    if (base[g + nbytes + i] != kGuardByte)
      bad = label_ + ": a block of " + std::to_string(nbytes) + " bytes was written at byte " +
            std::to_string(nbytes + i) + " (past its end)";
  std::free(base);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use -= static_cast<int64_t>(nbytes);
  if (!bad.empty()) violations_.push_back(bad);
}

AllocatorStats GuardedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void GuardedAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.in_use;
}

std::vector<std::string> GuardedAllocator::take_violations() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> v;
  v.swap(violations_);
  return v;
}

}  // namespace ember::emu
