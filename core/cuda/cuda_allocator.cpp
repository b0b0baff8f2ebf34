// The CUDA memory backends of core/caching_allocator.h: one caching allocator per GPU over
// cudaMalloc/cudaFree, and one for page-locked host memory over cudaHostAlloc. The caching rules
// themselves are tested on the CPU with a fake backend (tests/core/caching_allocator_test.cpp);
// this file is only the driver calls.
#include "core/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/caching_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_count.h"
#include "core/cuda/device_guard.h"
#include "core/pinned_allocator.h"

namespace ember::cuda {

namespace {

// Events for record_stream: recorded on a stream of `stream`'s device.
class EventOps {
 public:
  static void* record(StreamHandle s) {
    auto stream = reinterpret_cast<cudaStream_t>(s);
    DeviceGuard g(Device::cuda(device_of(stream)));
    cudaEvent_t ev = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    EMBER_CUDA_CHECK(cudaEventRecord(ev, stream));
    return ev;
  }
  static bool done(void* e) {
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    EMBER_CUDA_CHECK(err);
    return true;
  }
  static void wait(void* e) { EMBER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e))); }
  static void destroy(void* e) { EMBER_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(e))); }
};

class DeviceBackend final : public MemoryBackend {
 public:
  explicit DeviceBackend(int device) : device_(device) {}
  void* raw_alloc(size_t bytes) override {
    DeviceGuard g(Device::cuda(device_));
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: the cache frees memory and retries
      return nullptr;
    }
    EMBER_CUDA_CHECK(err);
    return p;
  }
  void raw_free(void* p) override {
    DeviceGuard g(Device::cuda(device_));
    EMBER_CUDA_CHECK(cudaFree(p));
  }
  void* record_event(StreamHandle s) override { return EventOps::record(s); }
  bool event_done(void* e) override { return EventOps::done(e); }
  void wait_event(void* e) override { EventOps::wait(e); }
  void destroy_event(void* e) override { EventOps::destroy(e); }
  std::string describe() override {
    DeviceGuard g(Device::cuda(device_));
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return {};
    }
    return "the device has " + std::to_string(free_b) + " of " + std::to_string(total) + " bytes free";
  }

 private:
  int device_;
};

class PinnedBackend final : public MemoryBackend {
 public:
  void* raw_alloc(size_t bytes) override {
    void* p = nullptr;
    // Portable: the buffer may be copied to any of the GPUs.
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(err);
    return p;
  }
  void raw_free(void* p) override { EMBER_CUDA_CHECK(cudaFreeHost(p)); }
  void* record_event(StreamHandle s) override { return EventOps::record(s); }
  bool event_done(void* e) override { return EventOps::done(e); }
  void wait_event(void* e) override { EventOps::wait(e); }
  void destroy_event(void* e) override { EventOps::destroy(e); }
};

// Page-locked memory needs a driver; on a machine without a GPU the pinned allocator is the CPU's,
// so a CUDA build still loads data there.
class PinnedOrHost final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override { return impl()->allocate(nbytes); }
  AllocatorStats stats() const override { return impl()->stats(); }
  void reset_peak() override { impl()->reset_peak(); }
  void empty_cache() override { impl()->empty_cache(); }
  void record_stream(void* p, Stream& s) override { impl()->record_stream(p, s); }
  // The page-locked cache, or null on a machine without a GPU.
  static CachingAllocator* caching() { return dynamic_cast<CachingAllocator*>(impl()); }

 private:
  static Allocator* impl() {
    static Allocator* a =
        physical_device_count() > 0
            ? static_cast<Allocator*>(new CachingAllocator("pinned host memory", std::make_unique<PinnedBackend>()))
            : cpu_allocator();
    return a;
  }
};

}  // namespace

CachingAllocator& device_allocator(int index) {
  check_device(index);
  static std::mutex mu;
  static std::vector<CachingAllocator*>* all = new std::vector<CachingAllocator*>();  // leaked, see below
  std::lock_guard<std::mutex> lock(mu);
  if (all->empty()) all->assign(physical_device_count(), nullptr);
  CachingAllocator*& a = (*all)[index];
  if (!a) {
    // Leaked: tensors with static storage duration are freed after main returns and must still
    // find their allocator.
    a = new CachingAllocator("cuda:" + std::to_string(index), std::make_unique<DeviceBackend>(index),
                             [index] { return reinterpret_cast<StreamHandle>(raw(current_stream(index))); });
    // From the first use of a GPU on, the DataLoader's pin_memory batches (core/pinned_allocator.h)
    // come from page-locked memory; before that (and on machines without a GPU) they need not.
    register_pinned_host_allocator(host_pinned_allocator());
  }
  return *a;
}

Allocator* host_pinned_allocator() {
  static PinnedOrHost* a = new PinnedOrHost();
  return a;
}

bool pinned_record_stream(void* base, Stream& s) {
  (void)host_pinned_allocator();
  CachingAllocator* c = PinnedOrHost::caching();
  if (!c || !c->owns(base)) return false;
  c->record_stream(base, s);
  return true;
}

namespace {
[[maybe_unused]] const bool registered = [] {
  register_allocator_fn(DeviceType::CUDA, [](int index) -> Allocator* { return &device_allocator(index); });
  register_pinned_allocator(host_pinned_allocator());
  return true;
}();
}  // namespace

}  // namespace ember::cuda
