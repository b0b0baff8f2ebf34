// copy_stub for CUDA: every copy that has a CUDA tensor on either side (Tensor::copy_ and
// Tensor::to() route them here). Host<->device transfers run on the device's copy stream, fenced
// with events against the current (compute) stream on both sides, so they are ordered with the
// kernels before and after them; device-to-host copies wait for their data before returning,
// host-to-device copies from pinned memory return at once (the pinned block is kept from reuse
// until the transfer is done). A dtype change on a device is core/cuda/cast.cu's kernel (every
// dtype pair, float16/bfloat16 included); only a change across two GPUs goes through the host.
#include "core/copy.h"

#include <cuda_runtime_api.h>

#include "core/autograd/grad_mode.h"
#include "core/cuda/cast.h"
#include "core/cuda/copy_kernel.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_graph.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/deferred_check.h"
#include "core/cuda/device_guard.h"

namespace ember::cuda {
namespace {

size_t nbytes_of(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.itemsize();
}

bool is_pinned(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

// dst (contiguous, CUDA) <- src (contiguous, CPU, same dtype).
void host_to_device(const Tensor& dst, const Tensor& src) {
  const int dev = dst.device().index;
  DeviceGuard g(dst.device());
  Stream& compute = current_stream(dev);
  Stream& copy = stream(dev, StreamKind::Copy);
  stream_wait_stream(copy, compute);  // earlier kernels may still use dst's block
  const bool pinned = is_pinned(src.raw_data());
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes_of(dst), cudaMemcpyHostToDevice, raw(copy)));
  if (pinned) {
    // host_pinned_allocator() is a wrapper (page-locked or plain, decided on first use), so the
    // cache behind it is asked, not the wrapper.
    if (!pinned_record_stream(src.storage()->ptr(), copy))
      EMBER_CUDA_CHECK(cudaStreamSynchronize(raw(copy)));  // someone else's page-locked buffer
  }
  // From pageable memory cudaMemcpyAsync returns once the data is staged, so src may go now.
  stream_wait_stream(compute, copy);
}

// dst (contiguous, CPU, same dtype) <- src (contiguous, CUDA). Returns with dst written.
void device_to_host(const Tensor& dst, const Tensor& src) {
  const int dev = src.device().index;
  DeviceGuard g(src.device());
  Stream& compute = current_stream(dev);
  Stream& copy = stream(dev, StreamKind::Copy);
  refuse_host_wait_in_capture(raw(compute), "a device-to-host copy (item(), to(cpu))");
  stream_wait_stream(copy, compute);  // the kernels that produce src
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes_of(dst), cudaMemcpyDeviceToHost, raw(copy)));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(raw(copy)));
  // The host has waited for the kernels before the copy: the data errors they found (deferred
  // checks, core/cuda/deferred_check.h) have landed and are reported here, e.g. at loss.item().
  run_deferred_checks(dev, false);
}

// dst and src contiguous, same dtype, different GPUs.
void device_to_device_peer(const Tensor& dst, const Tensor& src) {
  const int dd = dst.device().index, sd = src.device().index;
  Stream& dst_stream = current_stream(dd);
  stream_wait_stream(dst_stream, current_stream(sd));  // src is complete
  DeviceGuard g(dst.device());
  EMBER_CUDA_CHECK(cudaMemcpyPeerAsync(dst.raw_data(), dd, src.raw_data(), sd, nbytes_of(dst), raw(dst_stream)));
  // src's block must not be reused on its own device before the transfer has read it.
  device_allocator(sd).record_stream(src.storage()->ptr(), dst_stream);
}

void cuda_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  NoGradGuard no_grad;  // the staging below is not part of any graph
  const Device dd = dst.device(), sd = src.device();

  if (dd.is_cuda() && sd.is_cuda() && dd == sd && dst.dtype() == src.dtype()) {
    DeviceGuard g(dd);
    if (dst.is_contiguous() && src.is_contiguous()) {
      if (dst.raw_data() != src.raw_data())
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), nbytes_of(dst), cudaMemcpyDeviceToDevice,
                                         raw(current_stream(dd.index))));
    } else {
      copy_same_dtype_on_device(dst, src);
    }
    return;
  }

  if (sd.is_cpu()) {
    // Host to device: convert and pack on the host, then one transfer.
    Tensor h = src.dtype() == dst.dtype() ? src.contiguous() : src.to(dst.dtype()).contiguous();
    if (dst.is_contiguous()) {
      host_to_device(dst, h);
    } else {
      Tensor tmp = empty(dst.shape(), {dst.dtype(), dd});
      host_to_device(tmp, h);
      cuda_copy(dst, tmp);
    }
    return;
  }

  if (dd.is_cpu()) {
    // Device to host: pack on the device, one transfer, then convert/scatter on the host.
    Tensor s = src.contiguous();
    if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
      device_to_host(dst, s);
    } else {
      Tensor h = empty(src.shape(), {src.dtype(), Device::cpu()});
      device_to_host(h, s);
      copy_stub(Device::cpu())(dst, h);
    }
    return;
  }

  if (dd == sd) {  // a dtype change on one GPU (all eight dtypes, float16/bfloat16 included)
    cast_copy(dst, src);
    return;
  }
  if (dst.dtype() != src.dtype()) {
    // A dtype change across GPUs: through the host, which is correct and slow (rare: a model
    // moves between devices in its own dtype and converts on one of them).
    Tensor h = empty(src.shape(), {dst.dtype(), Device::cpu()});
    cuda_copy(h, src);
    cuda_copy(dst, h);
    return;
  }

  // Same dtype, different GPUs: pack on the source device, one peer transfer, unpack on the
  // destination device.
  Tensor s = src.contiguous();
  if (dst.is_contiguous()) {
    device_to_device_peer(dst, s);
  } else {
    Tensor tmp = empty(dst.shape(), {dst.dtype(), dd});
    device_to_device_peer(tmp, s);
    cuda_copy(dst, tmp);
  }
}

}  // namespace

EMBER_REGISTER_KERNEL(copy_stub, CUDA, cuda_copy);

}  // namespace ember::cuda
