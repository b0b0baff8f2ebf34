#include "core/cuda/emu/emu_device.h"

#include <cstring>

#include "core/autograd/grad_mode.h"
#include "core/copy.h"
#include "core/cuda/cast.h"
#include "core/cuda/copy_kernel.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace ember::emu {
namespace {

size_t nbytes_of(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.itemsize();
}

// A transfer between host memory and the device's (both host memory here): contiguous, same dtype.
void transfer(const Tensor& dst, const Tensor& src) {
  if (dst.raw_data() != src.raw_data()) std::memmove(dst.raw_data(), src.raw_data(), nbytes_of(dst));
}

// copy_stub for the emulated device, shaped like the CUDA backend's: a dtype change on the device
// is the cast kernel, a strided copy the copy kernel, and a host side is packed and converted on
// the host around one transfer.
void emu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  NoGradGuard no_grad;
  const Device dd = dst.device(), sd = src.device();
  if (dd.is_emulated() && sd.is_emulated()) {
    if (dst.dtype() != src.dtype()) {
      cuda::cast_copy(dst, src);
    } else if (dst.is_contiguous() && src.is_contiguous()) {
      transfer(dst, src);
    } else {
      cuda::copy_same_dtype_on_device(dst, src);
    }
    return;
  }
  if (sd.is_cpu()) {
    Tensor h = src.dtype() == dst.dtype() ? src.contiguous() : src.to(dst.dtype()).contiguous();
    if (dst.is_contiguous()) {
      transfer(dst, h);
    } else {
      Tensor tmp = empty(dst.shape(), {dst.dtype(), dd});
      transfer(tmp, h);
      emu_copy(dst, tmp);
    }
    return;
  }
  EMBER_CHECK(dd.is_cpu(), "copy: from ", sd, " to ", dd, " is not supported");
  Tensor s = src.contiguous();
  if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
    transfer(dst, s);
  } else {
    Tensor h = empty(src.shape(), {src.dtype(), Device::cpu()});
    transfer(h, s);
    copy_stub(Device::cpu())(dst, h);
  }
}

// Work on the emulated device runs on the calling thread, in order: every stream is the same
// in-order queue and every event has already happened.
class InOrderStream final : public Stream {
 public:
  explicit InOrderStream(StreamKind k) : kind_(k) {}
  Device device() const override { return emu::device(); }
  StreamKind kind() const override { return kind_; }
  void synchronize() override {}
  void wait(const Event&) override {}

 private:
  StreamKind kind_;
};
class DoneEvent final : public Event {
 public:
  void record(Stream&) override {}
  bool query() const override { return true; }
  void synchronize() override {}
};

Stream& emu_stream(Device, StreamKind kind) {
  static InOrderStream streams[3] = {InOrderStream(StreamKind::Compute), InOrderStream(StreamKind::Copy),
                                     InOrderStream(StreamKind::Communication)};
  return streams[static_cast<int>(kind)];
}
std::unique_ptr<Event> emu_event(Device) {
  return std::make_unique<DoneEvent>();
}

Allocator* allocator_for(int index) {
  EMBER_CHECK(index == 0, "device emu:", index, ": the emulated device has index 0 only");
  return &device_allocator();
}

[[maybe_unused]] const bool g_registered = [] {
  register_allocator_fn(DeviceType::Emulated, &allocator_for);
  register_stream_factory(DeviceType::Emulated, {&emu_stream, &emu_event});
  return true;
}();

}  // namespace

GuardedAllocator& device_allocator() {
  static GuardedAllocator* a = new GuardedAllocator("emu");  // tensors may outlive main
  return *a;
}

EMBER_REGISTER_KERNEL(copy_stub, EMULATED, emu_copy);

}  // namespace ember::emu
