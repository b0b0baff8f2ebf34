// Arguments that several `ember` commands read the same way: a leading file before the flags
// (`ember eval CHECKPOINT --data D`, `ember export onnx MODEL_FILE ...`) and --device.
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "tools/flags.h"

namespace ember::tools {

// The first argument when it is not a flag, taken off `args`; "" when there is none.
inline std::string take_leading_argument(std::vector<std::string>& args) {
  if (args.empty() || args[0].starts_with("-")) return "";
  std::string first = args[0];
  args.erase(args.begin());
  return first;
}

// --device: auto (the best there is, as the examples' default), cpu, cuda or cuda:N.
inline Device device_flag(const Flags& f) {
  const std::string d = f.str("device", "auto");
  if (d == "auto") return Device::best();
  try {
    return Device(d);
  } catch (const Error&) {
    throw UsageError("--device: expected auto, cpu, cuda or cuda:N, got '" + d + "'");
  }
}

}  // namespace ember::tools
