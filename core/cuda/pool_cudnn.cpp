// Average pooling on CUDA: the choosers registered as avg_pool2d_forward_stub's and
// avg_pool2d_backward_stub's CUDA kernels, and cuDNN as the vendor implementation. The P = N * C
// planes are one NCHW tensor with C = 1. cuDNN is used only when its output size equals Ember's:
// then every window lies inside the padded input, and cuDNN's divisors (the whole window with
// count_include_pad, the input part without) are Ember's (PyTorch's). Max pooling has no vendor
// path: cuDNN returns no argmax indices, which Ember's max-pool backward needs. Ran on a lent H200
// (2026-12-04: the op table's cuda_vendor rows); scripts/gpu-check.sh checks it against the CPU.
#include "core/cuda/cudnn_common.h"

#if EMBER_WITH_CUDNN

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // see cudnn_common.h

#include <climits>
#include <string>

#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/native_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

struct PoolDescs {
  TensorDesc x, y;
  PoolDesc pool;
  bool ok = false;  // cuDNN agrees with Ember's output size
};

bool fits_int(const Pool2dGeometry& g) {
  for (int64_t v : {g.P, g.H, g.W, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw})
    if (v < 0 || v > INT_MAX) return false;
  return g.P > 0 && g.OH > 0 && g.OW > 0;
}

void describe(PoolDescs& d, const Pool2dGeometry& g, DType t) {
  set_nchw(d.x, t, g.P, 1, g.H, g.W);
  set_nchw(d.y, t, g.P, 1, g.OH, g.OW);
  const cudnnPoolingMode_t mode =
      g.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  EMBER_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d.pool, mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(g.kh),
                                                static_cast<int>(g.kw), static_cast<int>(g.ph), static_cast<int>(g.pw),
                                                static_cast<int>(g.sh), static_cast<int>(g.sw)));
  int n = 0, c = 0, h = 0, w = 0;
  EMBER_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(d.pool, d.x, &n, &c, &h, &w));
  d.ok = h == g.OH && w == g.OW;
}

bool cudnn_can(const Pool2dGeometry& g, DType t) {
  if ((t != DType::Float32 && t != DType::Float64) || !fits_int(g)) return false;
  try {
    PoolDescs d;
    describe(d, g, t);
    return d.ok;
  } catch (const Error&) {
    return false;
  }
}

struct Scalars {
  double d0 = 0.0, d1 = 1.0;
  float f0 = 0.0f, f1 = 1.0f;
  const void* one(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d0) : &f0; }
};

void cudnn_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const int dev = input.device().index;
  DeviceGuard guard(input.device());
  const DType t = input.dtype();
  PoolDescs d;
  describe(d, g, t);
  Scalars s;
  EMBER_CUDNN_CHECK(
      cudnnPoolingForward(cudnn_handle(dev), d.pool, s.one(t), d.x, input.raw_data(), s.zero(t), d.y, out.raw_data()));
}

void cudnn_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  const int dev = grad_out.device().index;
  DeviceGuard guard(grad_out.device());
  const DType t = grad_out.dtype();
  PoolDescs d;
  describe(d, g, t);
  Scalars s;
  // Average pooling's gradient does not depend on x or y, which the stub does not pass; cuDNN
  // still takes them, so y is given as dy and x as dx (valid memory of the right shapes).
  EMBER_CUDNN_CHECK(cudnnPoolingBackward(cudnn_handle(dev), d.pool, s.one(t), d.y, grad_out.raw_data(), d.y,
                                         grad_out.raw_data(), d.x, grad_input.raw_data(), s.zero(t), d.x,
                                         grad_input.raw_data()));
}

std::string pool_key(const char* pass, const Pool2dGeometry& g, DType t) {
  return ::ember::detail::concat(pass, " ", dtype_name(t), " P=", g.P, " ", g.H, "x", g.W, "->", g.OH, "x", g.OW,
                                 " k=", g.kh, "x", g.kw, " s=", g.sh, ",", g.sw, " p=", g.ph, ",", g.pw,
                                 g.count_include_pad ? " incl" : " excl");
}

KernelTimer timer_for(int dev) {
  return [dev](const std::function<void()>& fn) { return time_on_stream(dev, fn); };
}

void cuda_avg_pool_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  if (out.numel() == 0) return;
  DeviceGuard guard(input.device());
  const auto native = native_kernel(avg_pool2d_forward_stub, KernelFamily::Pool);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] { native.fn(out, input, g); }};
  KernelCandidate ven{cudnn_can(g, input.dtype()), true, [&] { cudnn_forward(out, input, g); }};
  kernel_selector().run(KernelFamily::Pool, pool_key("avg fwd", g, input.dtype()), nat, ven,
                        timer_for(input.device().index));
}

void cuda_avg_pool_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  if (grad_input.numel() == 0) return;
  DeviceGuard guard(grad_out.device());
  const auto native = native_kernel(avg_pool2d_backward_stub, KernelFamily::Pool);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] { native.fn(grad_input, grad_out, g); }};
  KernelCandidate ven{cudnn_can(g, grad_out.dtype()), true, [&] { cudnn_backward(grad_input, grad_out, g); }};
  kernel_selector().run(KernelFamily::Pool, pool_key("avg bwd", g, grad_out.dtype()), nat, ven,
                        timer_for(grad_out.device().index));
}

}  // namespace

EMBER_REGISTER_KERNEL(avg_pool2d_forward_stub, CUDA, cuda_avg_pool_forward);
EMBER_REGISTER_KERNEL(avg_pool2d_backward_stub, CUDA, cuda_avg_pool_backward);

namespace {
[[maybe_unused]] const bool vendor_registered = [] {
  register_vendor(KernelFamily::Pool);
  return true;
}();
}  // namespace

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
