#include "core/cuda/cuda_stream.h"

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_graph.h"
#include "core/cuda/deferred_check.h"
#include "core/cuda/device_count.h"
#include "core/cuda/device_guard.h"
#include "core/error.h"

namespace ember::cuda {

namespace {

class CudaStream final : public Stream {
 public:
  CudaStream(int device, StreamKind kind, cudaStream_t s) : device_(device), kind_(kind), s_(s) {}
  Device device() const override { return Device::cuda(device_); }
  StreamKind kind() const override { return kind_; }
  void synchronize() override {
    DeviceGuard g(device());
    refuse_host_wait_in_capture(s_, "a synchronize() of the stream");
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s_));
    // A synchronisation point: data errors the compute stream's kernels found are reported.
    if (kind_ == StreamKind::Compute) run_deferred_checks(device_, false);
  }
  void wait(const Event& e) override;
  void* native_handle() const override { return s_; }

 private:
  int device_;
  StreamKind kind_;
  cudaStream_t s_;
};

// Created on first record, on the device of the stream it is recorded on (CUDA requires an event
// and its stream to share a device). Timing is off: it makes record and query cheaper.
class CudaEvent final : public Event {
 public:
  ~CudaEvent() override {
    if (ev_) (void)cudaEventDestroy(ev_);
  }
  void record(Stream& s) override {
    EMBER_CHECK(s.device().is_cuda(), "event: cannot record a CUDA event on a ", s.device(), " stream");
    DeviceGuard g(s.device());
    if (ev_ && device_ != s.device().index) {
      EMBER_CUDA_CHECK(cudaEventDestroy(ev_));
      ev_ = nullptr;
    }
    if (!ev_) {
      EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
      device_ = s.device().index;
    }
    EMBER_CUDA_CHECK(cudaEventRecord(ev_, raw(s)));
  }
  bool query() const override {
    if (!ev_) return true;  // never recorded: nothing to wait for, as for cudaEvent semantics
    const cudaError_t err = cudaEventQuery(ev_);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    EMBER_CUDA_CHECK(err);
    return true;
  }
  void synchronize() override {
    if (ev_) EMBER_CUDA_CHECK(cudaEventSynchronize(ev_));
  }
  void* native_handle() const override { return ev_; }

 private:
  cudaEvent_t ev_ = nullptr;
  int device_ = -1;
};

void CudaStream::wait(const Event& e) {
  auto ev = static_cast<cudaEvent_t>(e.native_handle());
  if (!ev) return;  // a CPU event or one never recorded: already complete
  DeviceGuard g(device());
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(s_, ev, 0));
}

struct Registry {
  std::mutex mu;
  // [device][kind]; streams live for the process (destroying them at exit races driver teardown).
  std::vector<std::array<CudaStream*, 3>> streams;
  std::unordered_map<cudaStream_t, int> device_of;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

thread_local std::unordered_map<int, Stream*> t_current;

}  // namespace

void check_device(int index) {
  const int n = physical_device_count();
  EMBER_CHECK(index >= 0 && index < n, "cuda:", index, ": no such device (", n,
              n == 1 ? " CUDA device is" : " CUDA devices are", " visible to this process)");
}

Stream& stream(int device, StreamKind kind) {
  check_device(device);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.streams.empty()) r.streams.assign(physical_device_count(), {nullptr, nullptr, nullptr});
  CudaStream*& slot = r.streams[device][static_cast<int>(kind)];
  if (!slot) {
    cudaStream_t s = nullptr;
    DeviceGuard g(Device::cuda(device));
    // Every stream is created non-blocking: the legacy default stream (stream 0) cannot be
    // captured into a CUDA graph and serialises with every other blocking stream, so Ember never
    // queues work on it; anything that must be ordered with Ember's kernels uses these streams.
    if (kind == StreamKind::Compute) {
      EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    } else {
      // Copies and collectives are the latency-sensitive work that overlaps with compute.
      int lo = 0, hi = 0;
      EMBER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
      EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
    }
    r.device_of[s] = device;
    slot = new CudaStream(device, kind, s);
  }
  return *slot;
}

Stream& current_stream(int device) {
  auto it = t_current.find(device);
  if (it != t_current.end()) return *it->second;
  return stream(device, StreamKind::Compute);
}

int device_of(cudaStream_t s) {
  if (s) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.device_of.find(s);
    if (it != r.device_of.end()) return it->second;
  }
  int d = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

int device_of_pointer(const void* p) {
  cudaPointerAttributes attr{};
  EMBER_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  EMBER_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, "pointer ", p,
              " is not CUDA device memory");
  return attr.device;
}

StreamGuard::StreamGuard(Stream& s) : device_(s.device().index), prev_(nullptr) {
  EMBER_CHECK(s.device().is_cuda(), "StreamGuard: ", s.device(), " is not a CUDA device");
  auto it = t_current.find(device_);
  if (it != t_current.end()) prev_ = it->second;
  t_current[device_] = &s;
}

StreamGuard::~StreamGuard() {
  if (prev_) {
    t_current[device_] = prev_;
  } else {
    t_current.erase(device_);
  }
}

void stream_wait_stream(Stream& waiter, Stream& producer) {
  if (waiter.native_handle() == producer.native_handle() && waiter.device() == producer.device()) return;
  CudaEvent e;
  e.record(producer);
  waiter.wait(e);
}

double time_on_stream(int device, const std::function<void()>& fn) {
  DeviceGuard g(Device::cuda(device));
  cudaStream_t s = raw(current_stream(device));
  cudaEvent_t start = nullptr, stop = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreate(&start));
  EMBER_CUDA_CHECK(cudaEventCreate(&stop));
  float ms = 0.0f;
  try {
    EMBER_CUDA_CHECK(cudaEventRecord(start, s));
    fn();
    EMBER_CUDA_CHECK(cudaEventRecord(stop, s));
    EMBER_CUDA_CHECK(cudaEventSynchronize(stop));
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    throw;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return ms;
}

namespace {
[[maybe_unused]] const bool registered = [] {
  register_stream_factory(DeviceType::CUDA, {[](Device d, StreamKind k) -> Stream& { return stream(d.index, k); },
                                             [](Device d) -> std::unique_ptr<Event> {
                                               check_device(d.index);
                                               return std::make_unique<CudaEvent>();
                                             }});
  return true;
}();
}  // namespace

}  // namespace ember::cuda
