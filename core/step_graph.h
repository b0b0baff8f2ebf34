// A step's device work recorded once and replayed: the device-neutral face of CUDA graphs
// (core/cuda/cuda_graph.cpp implements it; docs/cuda/runtime.md, "CUDA graphs").
//
// capture_step_graph(device, fn) calls fn once while the device's current stream records its
// launches instead of running them, and returns a StepGraph whose replay() queues them all as one
// graph launch. Nothing runs during the capture: the step's effects happen at each replay. The
// tensors fn allocates come from a private pool of the caching allocator, so the addresses the
// graph writes stay valid and unshared for the graph's life; tensors made before the capture
// (parameters, optimizer state, static inputs) are used in place. The caller feeds a new batch by
// copying it into the static inputs before replay(), and reads outputs from tensors fn kept.
//
// Refused with an ember::Error, and the capture abandoned: a device without graphs (the CPU runs
// each op when it is called: there is nothing to record), a host synchronisation inside fn (item(),
// to(cpu), an index check: the host cannot wait for work that is only being recorded), random
// numbers drawn on the device inside fn (the counter is read on the host at capture, so every
// replay would repeat the same numbers), and work fn leaves on another stream.
#pragma once

#include <functional>
#include <memory>

#include "core/device.h"

namespace ember {

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Queues the recorded work on the stream it was captured on; does not wait for it.
  virtual void replay() = 0;
  // Kernel launches recorded (for reports).
  virtual size_t recorded_nodes() const = 0;
};

std::unique_ptr<StepGraph> capture_step_graph(Device device, const std::function<void()>& fn);

// The backend's capture, registered by the CUDA backend at load time.
using StepGraphCapture = std::unique_ptr<StepGraph> (*)(Device, const std::function<void()>&);
void register_step_graph_capture(DeviceType t, StepGraphCapture f);

}  // namespace ember
