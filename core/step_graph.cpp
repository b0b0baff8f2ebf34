#include "core/step_graph.h"

#include "core/error.h"

namespace ember {

namespace {
StepGraphCapture g_capture[kNumDeviceTypes] = {};
}

void register_step_graph_capture(DeviceType t, StepGraphCapture f) {
  g_capture[static_cast<int>(t)] = f;
}

std::unique_ptr<StepGraph> capture_step_graph(Device device, const std::function<void()>& fn) {
  EMBER_CHECK(!device.is_cpu(), "CUDA graph capture: ", device,
              " runs each op when it is called, so there are no launches to record; capture needs a CUDA device "
              "(--device cuda)");
  StepGraphCapture f = g_capture[static_cast<int>(device.type)];
  EMBER_CHECK(f, "CUDA graph capture: ", device, " has no graph capture (was Ember built with CUDA?)");
  return f(device, fn);
}

}  // namespace ember
