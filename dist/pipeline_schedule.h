// The order in which one pipeline stage runs its micro-batches' forward and backward passes.
// GPipe (Huang et al., 2019): every forward, then every backward; a stage holds the activations of
// all M micro-batches at once. 1F1B (PipeDream-flush, Narayanan et al., 2021; Megatron's default):
// stage s of K runs min(M, K - s) forwards to fill the pipe, then alternates one forward with one
// backward, then drains the remaining backwards; it holds at most min(M, K - s) micro-batches and
// takes the same time as GPipe (the bubble is (K - 1) / (M + K - 1) of the step in both).
#pragma once

#include <string>
#include <vector>

namespace ember::dist {

enum class PipelineSchedule { GPipe, OneFOneB };

// "gpipe" or "1f1b" (the names the examples' --schedule flag takes); ember::Error otherwise.
PipelineSchedule parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  enum Kind { Forward, Backward } kind;
  int micro_batch;
  bool operator==(const PipelineAction&) const = default;
};

// The actions of stage `stage` (0-based) of `stages` for `micro_batches` micro-batches, in order.
// Every micro-batch appears once forward and later once backward; backwards run in micro-batch
// order on every stage, so neighbouring stages agree on the order of what they exchange.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule s, int stages, int stage, int micro_batches);

// The most micro-batches whose activations `stage` holds at once under `s`: M for GPipe,
// min(M, K - stage) for 1F1B.
int pipeline_in_flight(PipelineSchedule s, int stages, int stage, int micro_batches);

}  // namespace ember::dist
