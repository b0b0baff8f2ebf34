#include "core/cuda/deferred_check.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/error.h"

namespace ember::cuda {
namespace {

// A pinned landing slot and its event, recycled from check to check (allocating pinned memory
// or an event per forward would cost more than the synchronisation this replaces).
struct Slot {
  unsigned char* host = nullptr;
  cudaEvent_t done = nullptr;
};
struct Pending {
  Slot slot;
  DeferredRaise raise;
  bool graph_slot = false;  // a CUDA graph's: not recycled
};
struct Queue {
  std::deque<Pending> pending;
  std::vector<Slot> free;
  bool capturing = false;
  std::vector<CapturedCheck> captured;
};
struct Registry {
  std::mutex mu;
  std::map<int, Queue> by_device;
};
Registry& registry() {
  static Registry* r = new Registry();  // leaked: checks may run from tensors freed at exit
  return *r;
}

// defer_check inside a capture: a fresh slot, the copy recorded into the graph, no event.
bool capture_check(int device, cudaStream_t s, const void* src, size_t bytes, DeferredRaise& raise) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.by_device[device].capturing) return false;
  }
  DeviceGuard g(Device::cuda(device));
  CapturedCheck c;
  void* p = nullptr;
  EMBER_CUDA_CHECK(cudaHostAlloc(&p, kDeferredCheckBytes, cudaHostAllocPortable));
  c.host = static_cast<unsigned char*>(p);
  std::memset(c.host, 0, kDeferredCheckBytes);
  cudaEvent_t ev = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  c.done = ev;
  EMBER_CUDA_CHECK(cudaMemcpyAsync(c.host, src, bytes, cudaMemcpyDeviceToHost, s));
  c.raise = std::move(raise);
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_device[device].captured.push_back(std::move(c));
  return true;
}

}  // namespace

void defer_check(int device, void* stream, const void* src, size_t bytes, DeferredRaise raise) {
  EMBER_CHECK(bytes <= kDeferredCheckBytes, "deferred check: ", bytes, " bytes; at most ", kDeferredCheckBytes);
  run_deferred_checks(device, false);  // an earlier error is reported before this one is queued
  if (capture_check(device, static_cast<cudaStream_t>(stream), src, bytes, raise)) return;
  Registry& r = registry();
  Slot slot;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    Queue& q = r.by_device[device];
    if (!q.free.empty()) {
      slot = q.free.back();
      q.free.pop_back();
    }
  }
  DeviceGuard g(Device::cuda(device));
  if (!slot.host) {
    void* p = nullptr;
    EMBER_CUDA_CHECK(cudaHostAlloc(&p, kDeferredCheckBytes, cudaHostAllocPortable));
    slot.host = static_cast<unsigned char*>(p);
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }
  std::memset(slot.host, 0, kDeferredCheckBytes);
  auto s = static_cast<cudaStream_t>(stream);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(slot.host, src, bytes, cudaMemcpyDeviceToHost, s));
  EMBER_CUDA_CHECK(cudaEventRecord(slot.done, s));
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_device[device].pending.push_back({slot, std::move(raise)});
}

void begin_captured_checks(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  Queue& q = r.by_device[device];
  EMBER_CHECK(!q.capturing, "deferred checks: cuda:", device, " is already capturing a graph");
  q.capturing = true;
  q.captured.clear();
}

std::vector<CapturedCheck> end_captured_checks(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  Queue& q = r.by_device[device];
  q.capturing = false;
  return std::exchange(q.captured, {});
}

void queue_replayed_checks(int device, void* stream, const std::vector<CapturedCheck>& checks) {
  auto s = static_cast<cudaStream_t>(stream);
  for (const CapturedCheck& c : checks) {
    const auto ev = static_cast<cudaEvent_t>(c.done);
    EMBER_CUDA_CHECK(cudaEventRecord(ev, s));
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.by_device[device].pending.push_back({Slot{c.host, ev}, c.raise, true});
  }
}

void run_deferred_checks(int device, bool wait) {
  Registry& r = registry();
  for (;;) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.by_device.find(device);
      if (it == r.by_device.end() || it->second.pending.empty()) return;
      Pending& front = it->second.pending.front();
      if (!wait) {
        const cudaError_t err = cudaEventQuery(front.slot.done);
        if (err == cudaErrorNotReady) {
          (void)cudaGetLastError();
          return;  // later checks were queued after this one: not landed either
        }
        EMBER_CUDA_CHECK(err);
      }
      p = std::move(front);
      it->second.pending.pop_front();
    }
    if (wait) EMBER_CUDA_CHECK(cudaEventSynchronize(p.slot.done));
    unsigned char bytes[kDeferredCheckBytes];
    std::memcpy(bytes, p.slot.host, kDeferredCheckBytes);
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (!p.graph_slot) r.by_device[device].free.push_back(p.slot);
    }
    p.raise(bytes);
  }
}

size_t pending_deferred_checks(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_device.find(device);
  return it == r.by_device.end() ? 0 : it->second.pending.size();
}

}  // namespace ember::cuda
