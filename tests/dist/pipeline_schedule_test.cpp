// The order each pipeline stage runs its micro-batches in (pipeline_schedule.h): for every small
// pipeline, each micro-batch runs forward once and later backward once, backwards in micro-batch
// order, and the activations held at once never exceed pipeline_in_flight (and reach it); GPipe is
// every forward then every backward; two 1F1B sequences written out by hand; parsing. Pure
// computation: every rank runs it alone, no collectives.
#include "dist/pipeline_schedule.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

using namespace ember::dist;
using test_util::error_of;
using test_util::has;

namespace {

constexpr auto F = PipelineAction::Forward;
constexpr auto B = PipelineAction::Backward;

}  // namespace

TEST(PipelineSchedule, EveryMicroBatchOnceForwardThenOnceBackward) {
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    for (int K = 1; K <= 5; ++K)
      for (int stage = 0; stage < K; ++stage)
        for (int M = 1; M <= 9; ++M) {
          SCOPED_TRACE(::testing::Message()
                       << pipeline_schedule_name(s) << " K=" << K << " stage " << stage << " M=" << M);
          const auto actions = pipeline_actions(s, K, stage, M);
          ASSERT_EQ(actions.size(), 2u * M);
          const int limit = pipeline_in_flight(s, K, stage, M);
          EXPECT_EQ(limit, s == PipelineSchedule::GPipe ? M : std::min(M, K - stage));
          std::vector<int> forwards(M, 0), backwards(M, 0);
          int live = 0, most_live = 0, next_backward = 0, next_forward = 0;
          for (const PipelineAction& a : actions) {
            ASSERT_TRUE(a.micro_batch >= 0 && a.micro_batch < M) << a.micro_batch;
            if (a.kind == F) {
              EXPECT_EQ(a.micro_batch, next_forward++);
              ++forwards[a.micro_batch];
              most_live = std::max(most_live, ++live);
            } else {
              EXPECT_EQ(forwards[a.micro_batch], 1) << "backward of " << a.micro_batch << " before its forward";
              EXPECT_EQ(a.micro_batch, next_backward++);
              ++backwards[a.micro_batch];
              --live;
            }
          }
          for (int m = 0; m < M; ++m) EXPECT_TRUE(forwards[m] == 1 && backwards[m] == 1) << "micro-batch " << m;
          EXPECT_EQ(most_live, limit);
          if (s == PipelineSchedule::GPipe) {
            for (int i = 0; i < 2 * M; ++i)
              EXPECT_EQ(actions[i], (PipelineAction{i < M ? F : B, i % M})) << "action " << i;
          }
        }
}

TEST(PipelineSchedule, OneFOneBByHand) {
  // Stage 0 of 4, 6 micro-batches: 4 forwards fill the pipe, two 1B1F pairs, 4 backwards drain it.
  EXPECT_EQ(pipeline_actions(PipelineSchedule::OneFOneB, 4, 0, 6),
            (std::vector<PipelineAction>{
                {F, 0}, {F, 1}, {F, 2}, {F, 3}, {B, 0}, {F, 4}, {B, 1}, {F, 5}, {B, 2}, {B, 3}, {B, 4}, {B, 5}}));
  // The last stage of 4, 3 micro-batches: each backward right after its forward.
  EXPECT_EQ(pipeline_actions(PipelineSchedule::OneFOneB, 4, 3, 3),
            (std::vector<PipelineAction>{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2}, {B, 2}}));
  // Fewer micro-batches than the pipe is deep: 1F1B is GPipe.
  EXPECT_EQ(pipeline_actions(PipelineSchedule::OneFOneB, 4, 0, 2), pipeline_actions(PipelineSchedule::GPipe, 4, 0, 2));
}

TEST(PipelineSchedule, ParseAndBadArguments) {
  EXPECT_EQ(parse_pipeline_schedule("gpipe"), PipelineSchedule::GPipe);
  EXPECT_EQ(parse_pipeline_schedule("1f1b"), PipelineSchedule::OneFOneB);
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    EXPECT_EQ(parse_pipeline_schedule(pipeline_schedule_name(s)), s);
  for (const char* bad : {"", "GPipe", "1F1B", "pipedream", "1f1b "}) {
    const std::string msg = error_of([&] { parse_pipeline_schedule(bad); });
    EXPECT_TRUE(has(msg, "expected 'gpipe' or '1f1b', got '" + std::string(bad) + "'")) << msg;
  }
  EXPECT_TRUE(has(error_of([] { pipeline_actions(PipelineSchedule::GPipe, 0, 0, 1); }), "at least one stage, got 0"));
  EXPECT_TRUE(has(error_of([] { pipeline_actions(PipelineSchedule::OneFOneB, 2, 2, 1); }), "stage 2 is not in [0, 2)"));
  EXPECT_TRUE(has(error_of([] { pipeline_in_flight(PipelineSchedule::OneFOneB, 2, -1, 1); }), "stage -1"));
  EXPECT_TRUE(
      has(error_of([] { pipeline_in_flight(PipelineSchedule::GPipe, 2, 0, 0); }), "at least one micro-batch, got 0"));
}
