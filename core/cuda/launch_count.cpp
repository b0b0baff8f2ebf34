#include "core/cuda/launch_count.h"

#include <atomic>

namespace ember::cuda {

namespace {
std::atomic<uint64_t> g_launches{0};
}

uint64_t kernel_launch_count() {
  return g_launches.load(std::memory_order_relaxed);
}

void detail::count_launch() {
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ember::cuda
