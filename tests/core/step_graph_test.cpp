// core/step_graph.h's refusals where no graph can be captured: the CPU (nothing is recorded there)
// and, in a CUDA build on a machine without a GPU, the missing device. The step is never called.
// Capture and replay themselves need a GPU (scripts/gpu-check.sh's cuda-graph rows).
#include "core/step_graph.h"

#include <ember/config.h>
#include <gtest/gtest.h>

#include "core/device.h"
#include "test_helpers.h"

using namespace ember;
using test_util::error_of;
using test_util::has;

TEST(StepGraph, CpuIsRefusedWithoutRunningTheStep) {
  int calls = 0;
  const std::string e = error_of([&] { (void)capture_step_graph(Device::cpu(), [&] { ++calls; }); });
  EXPECT_TRUE(has(e, "capture needs a CUDA device")) << e;
  EXPECT_EQ(calls, 0);
}

TEST(StepGraph, CudaWithoutAGpuIsRefusedWithoutRunningTheStep) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: scripts/gpu-check.sh captures there";
  int calls = 0;
  const std::string e = error_of([&] { (void)capture_step_graph(Device::cuda(0), [&] { ++calls; }); });
#if EMBER_WITH_CUDA
  EXPECT_TRUE(has(e, "no such device")) << e;
#else
  EXPECT_TRUE(has(e, "has no graph capture")) << e;
#endif
  EXPECT_EQ(calls, 0);
}
