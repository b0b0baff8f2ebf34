// Where to cut a model into pipeline stages: a per-layer cost profile (profile_layers) and an exact
// planner over contiguous partitions (plan_pipeline), one stage per device, devices of different
// speeds and memory.
//
// The cost model (a model, not a measurement; the runtime does not check it):
// - Time. Stage k runs layers [first, end) on devices[k]; its time per micro-batch is
//   sum(forward_s + backward_s) / devices[k].speed. Under GPipe and 1F1B alike a step of M
//   micro-batches takes (M + K - 1) times the slowest stage's time (the bubble), so the planner
//   minimises that bottleneck. Not modelled: sending activations and their gradients between
//   stages, the optimizer step, and any overlap or contention between stages on one host.
// - Memory. Stage s holds its layers' state once (parameters, gradients, optimizer state, buffers:
//   state_bytes) and, for each micro-batch in flight, what its layers keep for backward:
//     state + in_flight(s) * sum(activation_bytes)
//   where in_flight(s) = pipeline_in_flight(schedule, K, s, M): M for GPipe, min(M, K - s) for
//   1F1B. With recompute a stage keeps only its input per micro-batch in flight (the output_bytes
//   of the layer before it; PlanOptions::input_bytes for stage 0) and rebuilds one micro-batch's
//   activations at a time for its backward:
//     state + in_flight(s) * input + sum(activation_bytes)
//   Not modelled: the boundary buffers being sent or received and the gradients flowing back,
//   temporaries inside a layer's forward or backward (GEMM and convolution workspaces), the
//   allocator's rounding and fragmentation, and the memory the runtime itself needs. Leave
//   headroom in DeviceSpec::memory_bytes.
//
// The planner is exact under this model: a dynamic programme over (stage, layers so far) with
// prefix sums, O(K * L^2), finds the least bottleneck over every contiguous partition whose stages
// all fit their devices. Among partitions with that bottleneck it returns the one whose boundaries
// are lexicographically smallest (each stage starts as early as it can), which gives later
// stages the extra layers; under 1F1B later stages hold fewer micro-batches, so that choice also
// tends to need less memory.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dist/pipeline_schedule.h"

namespace ember {
class Tensor;
namespace nn {
class Sequential;
}
}  // namespace ember

namespace ember::dist {

struct LayerCost {
  std::string name;
  double forward_s = 0, backward_s = 0;  // per micro-batch, on a speed-1 device
  int64_t activation_bytes = 0;          // what the layer keeps for backward per micro-batch (its output, at least)
  int64_t output_bytes = 0;              // its output per micro-batch (what crosses a stage boundary)
  int64_t state_bytes = 0;               // parameters + gradients + optimizer state (+ buffers)
};

struct DeviceSpec {
  double speed = 1.0;  // relative to the device the layers were profiled on
  int64_t memory_bytes = std::numeric_limits<int64_t>::max();
};

struct PlanOptions {
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int micro_batches = 1;
  bool recompute = false;
  // One micro-batch's input to layer 0: what stage 0 keeps per micro-batch in flight under
  // recompute (0 when the caller does not count it).
  int64_t input_bytes = 0;
};

struct StagePlan {
  int first = 0, end = 0;  // layers [first, end)
  double time_s = 0;       // per micro-batch, on its device
  int64_t memory_bytes = 0;
  int64_t memory_cap_bytes = std::numeric_limits<int64_t>::max();  // its device's
};

struct PipelinePlan {
  std::vector<StagePlan> stages;
  double bottleneck_s = 0;  // the slowest stage's time per micro-batch
  double step_s = 0;        // (M + K - 1) * bottleneck
  PlanOptions options;

  std::vector<int> boundaries() const;  // first layer of each stage
  // One row per stage: stage, layers (indices and names first..last), time, memory, device cap.
  std::string table(const std::vector<LayerCost>& layers) const;
};

// Stage k runs on devices[k]; every stage gets at least one layer. ember::Error for bad input
// (no layers, no devices, fewer layers than devices, negative or non-finite costs, speed <= 0,
// memory <= 0, micro_batches < 1), and when no partition fits the devices' memory: the message
// names the partition closest to fitting, its tightest stage, what that stage needs and what its
// device has.
PipelinePlan plan_pipeline(const std::vector<LayerCost>& layers, const std::vector<DeviceSpec>& devices,
                           const PlanOptions& o);

// Runs each element of `model` in order, each on the previous one's output (the first on
// `micro_batch`, on the device the model and the batch are on): one warm-up, then `repeats` timed
// runs of its forward and of its backward from the gradient of sum(output) (steady clock, the
// device's compute stream synchronised; the median is kept). Inputs after the first require grad,
// as they do inside a pipeline. activation_bytes is what the forward left allocated on the
// device's allocator while its graph is alive (AllocatorStats::in_use, so block rounding is
// included), and at least the output's bytes. state_bytes counts each trainable parameter
// 2 + optimizer_bytes_per_parameter_byte times (itself, its gradient, the optimizer's state),
// frozen parameters and buffers once; a parameter shared by two elements counts in both, as both
// stages would hold it. The model's gradients, buffers (batch-norm statistics) and the default
// generator are restored afterwards, so profiling leaves training where it was.
std::vector<LayerCost> profile_layers(nn::Sequential& model, const Tensor& micro_batch, int repeats = 3,
                                      int64_t optimizer_bytes_per_parameter_byte = 2 /* Adam: two moments */);

}  // namespace ember::dist
