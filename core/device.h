// Where a tensor lives: the CPU or one CUDA device (or, in tests, the emulated one). Device::best() is what examples
// call to run on a GPU when the machine has one and on the CPU otherwise.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

// Emulated is a test-only device: Ember's CUDA kernels run by the kernel emulator
// (core/cuda/emu/) over exact-size host memory. It exists only in programs that link the emulator
// (the tests), so that ops and autograd run end to end on "CUDA" in CI machines without a GPU.
enum class DeviceType : uint8_t { CPU = 0, CUDA = 1, Emulated = 2 };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT
  // Parses "cpu", "cuda", "cuda:N" and "emu" (the test-only emulated device); anything else is an ember::Error naming
  // the string.
  explicit Device(const std::string& spec);

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  // cuda:0 when a CUDA backend is compiled in and a GPU is present, else cpu.
  static Device best();

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_emulated() const { return type == DeviceType::Emulated; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// Number of usable CUDA devices (0 when built without CUDA or without a GPU). The CUDA backend
// installs the real query at static-initialisation time.
int cuda_device_count();
namespace detail {
void set_cuda_device_count_fn(int (*fn)());
}

}  // namespace ember
