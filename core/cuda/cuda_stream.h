// CUDA streams and events behind core/stream.h, and the current stream that kernels launch on.
//
// Each device has three streams, all created non-blocking: compute, copy and communication
// (highest priority, so transfers and collectives overlap with compute). They are ordered with
// each other only through events, and never with the legacy default stream (stream 0), on which
// Ember queues nothing: work there would serialise with everything and cannot be captured into a
// CUDA graph. Code that synchronises or copies must name one of these streams (never a plain
// cudaMemcpy or stream 0, which would not wait for the compute stream). A thread may make
// another stream current for a device with StreamGuard; kernels launch on current_stream(), and
// the caching allocator ties each new block to it.
// Include only from core/cuda (the header pulls in the CUDA runtime's).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "core/device.h"
#include "core/stream.h"

namespace ember::cuda {

// Throws an ember::Error naming cuda:index when there is no such device (or no GPU at all).
void check_device(int index);

// The stream of `kind` for `device` (created on first use, alive for the process).
Stream& stream(int device, StreamKind kind = StreamKind::Compute);
inline cudaStream_t raw(const Stream& s) {
  return static_cast<cudaStream_t>(s.native_handle());
}
// The stream this thread launches on for `device`: its StreamGuard's, else the compute stream.
Stream& current_stream(int device);
// The device a stream handle belongs to (the current device for a stream Ember did not create).
int device_of(cudaStream_t s);

// The GPU a device pointer belongs to (ember::Error when it is not device memory).
int device_of_pointer(const void* p);

// Makes `s` the current stream of its device for this thread, for the guard's scope.
class StreamGuard {
 public:
  explicit StreamGuard(Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  Stream* prev_;
};

// Makes `waiter` wait for the work queued on `producer` so far (an event in between).
void stream_wait_stream(Stream& waiter, Stream& producer);

// Milliseconds one call of fn takes on the current stream of the current device, measured with
// CUDA events (synchronises the stream). The kernel selector's timer.
double time_on_stream(int device, const std::function<void()>& fn);

}  // namespace ember::cuda
