// CUDA graphs for a training step (core/step_graph.h). Never run on a GPU yet: written against the
// CUDA 13 runtime API and compiled in CI; the pool logic it relies on is tested on the CPU
// (tests/core/caching_allocator_pool_test.cpp). docs/cuda/runtime.md, "CUDA graphs".
#include "core/cuda/cuda_graph.h"

#include <string>
#include <utility>
#include <vector>

#include "core/caching_allocator.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/deferred_check.h"
#include "core/cuda/device_guard.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/step_graph.h"

namespace ember::cuda {

void refuse_host_wait_in_capture(cudaStream_t s, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  EMBER_CHECK(status != cudaStreamCaptureStatusActive, "CUDA graph capture: ", what,
              " inside the step being captured: the host cannot wait for work that is only being recorded (a "
              "data-dependent host synchronisation); move it out of the captured step");
}

namespace {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(int device, cudaStream_t s, PoolId pool, cudaGraph_t g, cudaGraphExec_t e,
                std::vector<CapturedCheck> checks)
      : device_(device), stream_(s), pool_(pool), graph_(g), exec_(e), checks_(std::move(checks)) {
    EMBER_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes_));
  }
  ~CudaStepGraph() override {
    DeviceGuard g(Device::cuda(device_));
    // The graph's last replay may still be running: its blocks go back only after it.
    (void)cudaStreamSynchronize(stream_);
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
    try {
      device_allocator(device_).release_pool(pool_);
    } catch (...) {  // a destructor must not throw; the pool then stays out of use
    }
  }
  void replay() override {
    DeviceGuard g(Device::cuda(device_));
    EMBER_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    // The data checks the step's kernels made (cross-entropy's targets) are read after this replay.
    queue_replayed_checks(device_, stream_, checks_);
  }
  size_t recorded_nodes() const override { return nodes_; }

 private:
  int device_;
  cudaStream_t stream_;
  PoolId pool_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::vector<CapturedCheck> checks_;
  size_t nodes_ = 0;
};

// Runs fn with the stream capturing and the allocator routing its blocks to `pool`; returns the
// graph (null when the capture failed) and, in `why`, what went wrong.
cudaGraph_t record(int device, cudaStream_t s, PoolId pool, const std::function<void()>& fn, std::string& why,
                   std::vector<CapturedCheck>& checks) {
  CachingAllocator& a = device_allocator(device);
  const auto handle = reinterpret_cast<StreamHandle>(s);
  const uint64_t rng_before = default_generator().state().offset;
  a.begin_pool(pool, handle);
  begin_captured_checks(device);
  // Relaxed: the allocator may call cudaMalloc for the pool's new blocks while the stream captures.
  cudaError_t err = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (err == cudaSuccess) {
    try {
      fn();
    } catch (const std::exception& e) {
      why = std::string("the step failed while being recorded: ") + e.what();
    }
  } else {
    why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(err);
  }
  cudaGraph_t graph = nullptr;
  if (err == cudaSuccess) err = cudaStreamEndCapture(s, &graph);
  a.end_pool(handle);
  checks = end_captured_checks(device);
  if (why.empty() && err != cudaSuccess)
    why = std::string("the capture was invalidated (") + cudaGetErrorString(err) +
          "): the step used the legacy default stream or left work on another stream unjoined";
  if (why.empty() && default_generator().state().offset != rng_before)
    why =
        "the step draws random numbers (randn, dropout, ...): their counter is a host value fixed at capture, "
        "so every replay would repeat the same numbers";
  if (!why.empty() && graph) {
    (void)cudaGraphDestroy(graph);
    graph = nullptr;
  }
  (void)cudaGetLastError();  // a failed capture's error is reported as `why`, not left sticky
  return graph;
}

std::unique_ptr<StepGraph> capture(Device d, const std::function<void()>& fn) {
  const int device = d.index;
  check_device(device);
  DeviceGuard g(d);
  Stream& st = current_stream(device);
  // Work queued before the capture is not part of it, and data errors it found are reported now.
  st.synchronize();
  const cudaStream_t s = raw(st);
  CachingAllocator& a = device_allocator(device);
  const PoolId pool = a.create_pool();
  std::string why;
  std::vector<CapturedCheck> checks;
  cudaGraph_t graph = record(device, s, pool, fn, why, checks);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    if (err != cudaSuccess) {
      why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(err);
      (void)cudaGetLastError();
      (void)cudaGraphDestroy(graph);
    }
  }
  if (!why.empty()) {
    a.release_pool(pool);
    EMBER_FAIL("CUDA graph capture on ", d, ": ", why);
  }
  return std::make_unique<CudaStepGraph>(device, s, pool, graph, exec, std::move(checks));
}

[[maybe_unused]] const bool registered = [] {
  register_step_graph_capture(DeviceType::CUDA, &capture);
  return true;
}();

}  // namespace

}  // namespace ember::cuda
