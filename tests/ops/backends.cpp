#include "backends.h"

#include "core/allocator.h"
#include "core/cpu_capability.h"
#include "core/cuda/emu/emu.h"
#include "core/cuda/emu/emu_device.h"
#include "core/cuda/emu/guarded_allocator.h"
#include "core/kernel_choice.h"

namespace ember::ops_test {
namespace {

// The CPU runs of the table allocate through guard zones too (the CPU's caching allocator would
// hand a kernel's overrun to the next tensor unnoticed).
emu::GuardedAllocator& cpu_guard() {
  static emu::GuardedAllocator* a = new emu::GuardedAllocator("cpu");
  return *a;
}

Backend cpu_backend(CpuCapability level) {
  const std::string name = std::string("cpu_") + cpu_capability_name(level);
  return {name,
          "cpu",
          Device::cpu(),
          [level]() -> std::string {
            if (!cpu_supports(level)) return "this CPU (" + cpu_model_name() + ") lacks " + cpu_capability_name(level);
            return "";
          },
          [level] {
            set_cpu_capability(level);
            register_allocator(DeviceType::CPU, &cpu_guard());
          },
          [] { register_allocator(DeviceType::CPU, nullptr); }};
}

Backend emu_backend(emu::ThreadOrder order) {
  return {std::string("emu_") + emu::thread_order_name(order),
          "emu",
          emu::device(),
          [] { return std::string(); },
          [order] {
            emu::set_thread_order(order, 7);
            register_allocator(DeviceType::CPU, &cpu_guard());
          },
          [] {
            emu::set_thread_order(emu::ThreadOrder::Forward, 0);
            register_allocator(DeviceType::CPU, nullptr);
          }};
}

Backend cuda_backend(KernelChoice choice) {
  return {std::string("cuda_") + kernel_choice_name(choice),
          "cuda",
          Device::cuda(0),
          [] { return cuda_device_count() > 0 ? std::string() : std::string("no CUDA device"); },
          [choice] { set_kernel_choices(kernel_choice_name(choice)); },
          [] { set_kernel_choices("auto"); }};
}

}  // namespace

const std::vector<Backend>& all_backends() {
  static const std::vector<Backend> all = [] {
    std::vector<Backend> b;
    for (CpuCapability level : cpu_capabilities_built()) b.push_back(cpu_backend(level));
    for (emu::ThreadOrder o : {emu::ThreadOrder::Forward, emu::ThreadOrder::Reverse, emu::ThreadOrder::Random})
      b.push_back(emu_backend(o));
    for (KernelChoice c : {KernelChoice::Native, KernelChoice::Vendor}) b.push_back(cuda_backend(c));
    return b;
  }();
  return all;
}

std::vector<const Backend*> backends_of(const std::string& group) {
  std::vector<const Backend*> r;
  for (const Backend& b : all_backends())
    if (b.group == group) r.push_back(&b);
  return r;
}

std::vector<std::string> take_guard_violations() {
  std::vector<std::string> v = cpu_guard().take_violations();
  for (std::string& s : emu::device_allocator().take_violations()) v.push_back(std::move(s));
  return v;
}

}  // namespace ember::ops_test
