// The registry for the pinned host allocator (core/pinned_allocator.h), filled by the CUDA backend.
#include "core/pinned_allocator.h"

#include <atomic>

namespace ember {

namespace {
std::atomic<Allocator*> g_pinned{nullptr};
}

Allocator* pinned_host_allocator() {
  return g_pinned.load(std::memory_order_acquire);
}

void register_pinned_host_allocator(Allocator* a) {
  g_pinned.store(a, std::memory_order_release);
}

}  // namespace ember
