#include "core/device.h"

#include "core/error.h"

namespace ember {

namespace {
int (*g_cuda_count_fn)() = nullptr;
}

void detail::set_cuda_device_count_fn(int (*fn)()) {
  g_cuda_count_fn = fn;
}

int cuda_device_count() {
  return g_cuda_count_fn ? g_cuda_count_fn() : 0;
}

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec == "emu" || spec == "emu:0") {
    type = DeviceType::Emulated;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() == 4) return;
    if (spec[4] == ':' && spec.size() > 5) {
      size_t pos = 0;
      try {
        index = std::stoi(spec.substr(5), &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos == spec.size() - 5 && index >= 0) return;
    }
  }
  EMBER_FAIL("device: cannot parse '", spec, "' (expected cpu, cuda or cuda:N)");
}

Device Device::best() {
  return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
}

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  if (is_emulated()) return "emu";
  return "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}

}  // namespace ember
