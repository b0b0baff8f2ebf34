#include "dist/pipeline_schedule.h"

#include <algorithm>

#include "core/error.h"

namespace ember::dist {

PipelineSchedule parse_pipeline_schedule(const std::string& name) {
  if (name == "gpipe") return PipelineSchedule::GPipe;
  if (name == "1f1b") return PipelineSchedule::OneFOneB;
  EMBER_FAIL("pipeline schedule: expected 'gpipe' or '1f1b', got '", name, "'");
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  return s == PipelineSchedule::GPipe ? "gpipe" : "1f1b";
}

namespace {
void check_args(int stages, int stage, int micro_batches) {
  EMBER_CHECK(stages >= 1, "pipeline: expected at least one stage, got ", stages);
  EMBER_CHECK(stage >= 0 && stage < stages, "pipeline: stage ", stage, " is not in [0, ", stages, ")");
  EMBER_CHECK(micro_batches >= 1, "pipeline: expected at least one micro-batch, got ", micro_batches);
}
}  // namespace

int pipeline_in_flight(PipelineSchedule s, int stages, int stage, int micro_batches) {
  check_args(stages, stage, micro_batches);
  return s == PipelineSchedule::GPipe ? micro_batches : std::min(micro_batches, stages - stage);
}

std::vector<PipelineAction> pipeline_actions(PipelineSchedule s, int stages, int stage, int micro_batches) {
  const int warmup = pipeline_in_flight(s, stages, stage, micro_batches);
  std::vector<PipelineAction> out;
  out.reserve(2 * static_cast<size_t>(micro_batches));
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) out.push_back({PipelineAction::Forward, next_forward});
  // Steady state: the backward of the oldest micro-batch frees its activations before the next
  // forward stores new ones, so at most `warmup` are held at any time.
  while (next_forward < micro_batches) {
    out.push_back({PipelineAction::Backward, next_backward++});
    out.push_back({PipelineAction::Forward, next_forward++});
  }
  while (next_backward < micro_batches) out.push_back({PipelineAction::Backward, next_backward++});
  return out;
}

}  // namespace ember::dist
