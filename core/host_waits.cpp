#include "core/host_waits.h"

#include <atomic>

namespace ember {

namespace {
std::atomic<uint64_t> g_host_waits{0};
}

uint64_t host_wait_count() {
  return g_host_waits.load(std::memory_order_relaxed);
}

void count_host_wait() {
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ember
