// Data errors that kernels find (an out-of-range class target), reported without a host
// synchronisation on the hot path. A kernel writes a few bytes of verdict into device memory; the
// host queues an asynchronous copy of them into pinned memory behind the kernels, with an event,
// and runs the check's `raise` (which throws ember::Error when the bytes say so) later: at the
// next point the host waits for the device anyway (a device-to-host copy, a synchronize of the
// compute stream), or at the next deferred check of the device once the copy has landed. The
// error therefore surfaces at most one synchronisation after the op that caused it, as with
// PyTorch's device-side asserts, but as an ordinary exception. Kernel files use
// cuda::check_deferred (core/cuda/launch.h), which the emulator runs at once. Plain C++ (no CUDA
// headers): the stream is passed as its handle.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace ember::cuda {

// The most bytes one check copies back.
constexpr size_t kDeferredCheckBytes = 32;

using DeferredRaise = std::function<void(const unsigned char* bytes)>;

// Queues the check of `bytes` at device pointer `src` of `device`, behind the work on `stream` (a
// cudaStream_t). Runs earlier checks of the device that have landed first.
void defer_check(int device, void* stream, const void* src, size_t bytes, DeferredRaise raise);

// Runs, oldest first, the raise of every queued check of `device` whose copy has landed (with
// `wait`: of every queued check, waiting for them). The first that throws propagates; later ones
// stay queued.
void run_deferred_checks(int device, bool wait);

// Checks still queued for `device` (for tests).
size_t pending_deferred_checks(int device);

// CUDA graphs (core/cuda/cuda_graph.cpp). Between begin_captured_checks and end_captured_checks,
// defer_check on `device` records its copy into the graph being captured, into a slot of the
// graph's own, and sets the check aside instead of queuing it (an event recorded in a capture
// cannot be polled). After each replay, queue_replayed_checks records the slot's event behind the
// replay on `stream` and queues the check as defer_check would, so a data error of a replayed step
// surfaces at the next synchronisation, as in eager mode. A graph's slots are never freed: a
// queued check may read them after the graph is gone (32 bytes each, a few per graph).
struct CapturedCheck {
  unsigned char* host = nullptr;  // the pinned slot every replay's copy writes
  void* done = nullptr;           // a cudaEvent_t, recorded after each replay
  DeferredRaise raise;
};
void begin_captured_checks(int device);
std::vector<CapturedCheck> end_captured_checks(int device);
void queue_replayed_checks(int device, void* stream, const std::vector<CapturedCheck>& checks);

}  // namespace ember::cuda
