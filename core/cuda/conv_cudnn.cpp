// Convolution on CUDA: the choosers registered as the conv2d stubs' CUDA kernels, and cuDNN as
// the vendor implementation of the forward and both backward passes. cuDNN's algorithm is
// searched once per shape (cudnnFind*AlgorithmEx, on the real buffers, with a workspace from the
// caching allocator) and cached; deterministic mode keeps only algorithms cuDNN marks
// deterministic. FP32 runs with FMA math only (no TF32), so results stay comparable with the CPU.
// Ran on a lent H200 (2026-12-04: the op table's cuda_vendor rows, bench_gpu); scripts/gpu-check.sh
// checks it each time.
#include "core/cuda/cudnn_common.h"

#if EMBER_WITH_CUDNN

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // see cudnn_common.h

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/native_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

// Largest workspace an algorithm search may use; algorithms needing more are skipped.
constexpr size_t kMaxWorkspace = size_t{1} << 30;

struct ConvDescs {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  bool ok = true;  // false when cuDNN's output size differs from Ember's (conv_transpose's padding)
};

void describe(ConvDescs& d, const ConvGeometry& g, DType t) {
  set_nchw(d.x, t, g.N, g.C, g.H, g.W);
  set_nchw(d.y, t, g.N, g.OC, g.OH, g.OW);
  EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.w, cudnn_dtype(t), CUDNN_TENSOR_NCHW, static_cast<int>(g.OC),
                                               static_cast<int>(g.C / g.groups), static_cast<int>(g.KH),
                                               static_cast<int>(g.KW)));
  const cudnnDataType_t compute = t == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      d.conv, static_cast<int>(g.ph), static_cast<int>(g.pw), static_cast<int>(g.sh), static_cast<int>(g.sw),
      static_cast<int>(g.dh), static_cast<int>(g.dw), CUDNN_CROSS_CORRELATION, compute));
  EMBER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(g.groups)));
  // float32 without TF32 (as the native kernel); bfloat16 and float16 on the tensor cores (cuDNN's
  // BFLOAT16 and PSEUDO_HALF configurations: 16-bit tensors, float32 compute).
  const bool half = t == DType::BFloat16 || t == DType::Float16;
  const cudnnMathType_t math = t == DType::Float32 ? CUDNN_FMA_MATH : half ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
  EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, math));
  int n = 0, c = 0, h = 0, w = 0;
  EMBER_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &c, &h, &w));
  d.ok = h == g.OH && w == g.OW;
}

void set_bias_desc(cudnnTensorDescriptor_t d, DType t, int64_t channels) {
  set_nchw(d, t, 1, channels, 1, 1);
}

std::string conv_key(const char* pass, const ConvGeometry& g, DType t) {
  return ::ember::detail::concat(pass, " ", dtype_name(t), " N=", g.N, " C=", g.C, " H=", g.H, " W=", g.W, " OC=", g.OC,
                                 " K=", g.KH, "x", g.KW, " O=", g.OH, "x", g.OW, " s=", g.sh, ",", g.sw, " p=", g.ph,
                                 ",", g.pw, " d=", g.dh, ",", g.dw, " g=", g.groups);
}

// The algorithm cache: (pass + shape + deterministic) -> algorithm and its workspace size.
struct Algo {
  int algo = 0;
  size_t workspace = 0;
};
std::mutex g_algo_mu;
std::map<std::string, Algo>& algo_cache() {
  static auto* m = new std::map<std::string, Algo>();
  return *m;
}

// Picks the fastest successful result that fits the deterministic requirement.
template <typename Perf>
Algo pick(const Perf* perf, int count, const std::string& key) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic() && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return {static_cast<int>(perf[i].algo), perf[i].memory};
  }
  EMBER_FAIL("conv2d (cuDNN): no ", deterministic() ? "deterministic " : "", "algorithm for ", key);
}

// Looks the algorithm up, or searches for it with `find(workspace, bytes, perf, &count)`.
template <typename Perf, typename Find>
Algo find_algo(int dev, const std::string& key, size_t max_ws, Find find) {
  const std::string k = key + (deterministic() ? " det" : "");
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = algo_cache().find(k);
    if (it != algo_cache().end()) return it->second;
  }
  max_ws = std::min(max_ws, kMaxWorkspace);
  DataPtr ws;
  try {
    ws = cudnn_workspace(dev, max_ws);
  } catch (const Error&) {  // not enough memory to search with a large workspace: search without
    max_ws = 0;
    ws = cudnn_workspace(dev, 0);
  }
  Perf perf[16];
  int count = 0;
  find(ws.get(), max_ws, perf, &count);
  const Algo a = pick(perf, count, key);
  std::lock_guard<std::mutex> lock(g_algo_mu);
  algo_cache()[k] = a;
  return a;
}

void add_bias(int dev, const Tensor& bias, cudnnTensorDescriptor_t out_desc, void* out, DType t, int64_t channels) {
  TensorDesc bd;
  set_bias_desc(bd, t, channels);
  const double one_d = 1.0;
  const float one_f = 1.0f;
  const void* one = t == DType::Float64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  EMBER_CUDNN_CHECK(cudnnAddTensor(cudnn_handle(dev), one, bd, bias.raw_data(), one, out_desc, out));
}

struct Scalars {
  double d0 = 0.0, d1 = 1.0;
  float f0 = 0.0f, f1 = 1.0f;
  const void* one(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d0) : &f0; }
};

void cudnn_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ConvGeometry& g) {
  const int dev = out.device().index;
  DeviceGuard guard(out.device());
  const DType t = out.dtype();
  ConvDescs d;
  describe(d, g, t);
  cudnnHandle_t h = cudnn_handle(dev);
  const std::string key = conv_key("fwd", g, t);
  const Algo a = find_algo<cudnnConvolutionFwdAlgoPerf_t>(
      dev, key, kMaxWorkspace, [&](void* ws, size_t bytes, auto* perf, int* n) {
        EMBER_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x, input.raw_data(), d.w, weight.raw_data(),
                                                                 d.conv, d.y, out.raw_data(), 16, n, perf, ws, bytes));
      });
  DataPtr ws = cudnn_workspace(dev, a.workspace);
  Scalars s;
  EMBER_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(t), d.x, input.raw_data(), d.w, weight.raw_data(), d.conv,
                                            static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ws.get(), a.workspace,
                                            s.zero(t), d.y, out.raw_data()));
  if (bias.defined()) add_bias(dev, bias, d.y, out.raw_data(), t, g.OC);
}

void cudnn_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const Tensor& bias,
                          const ConvGeometry& g) {
  const int dev = grad_input.device().index;
  DeviceGuard guard(grad_input.device());
  const DType t = grad_input.dtype();
  ConvDescs d;
  describe(d, g, t);
  cudnnHandle_t h = cudnn_handle(dev);
  const std::string key = conv_key("bwd_data", g, t);
  const Algo a = find_algo<cudnnConvolutionBwdDataAlgoPerf_t>(
      dev, key, kMaxWorkspace, [&](void* ws, size_t bytes, auto* perf, int* n) {
        EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, weight.raw_data(), d.y,
                                                                      grad_out.raw_data(), d.conv, d.x,
                                                                      grad_input.raw_data(), 16, n, perf, ws, bytes));
      });
  DataPtr ws = cudnn_workspace(dev, a.workspace);
  Scalars s;
  EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(t), d.w, weight.raw_data(), d.y, grad_out.raw_data(), d.conv,
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws.get(),
                                                 a.workspace, s.zero(t), d.x, grad_input.raw_data()));
  if (bias.defined()) add_bias(dev, bias, d.x, grad_input.raw_data(), t, g.C);
}

void cudnn_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                           const Tensor& input, const ConvGeometry& g) {
  const int dev = grad_out.device().index;
  DeviceGuard guard(grad_out.device());
  const DType t = grad_out.dtype();
  ConvDescs d;
  describe(d, g, t);
  cudnnHandle_t h = cudnn_handle(dev);
  Scalars s;
  if (grad_weight.defined()) {
    const std::string key = conv_key("bwd_filter", g, t);
    const Algo a = find_algo<cudnnConvolutionBwdFilterAlgoPerf_t>(
        dev, key, kMaxWorkspace, [&](void* ws, size_t bytes, auto* perf, int* n) {
          EMBER_CUDNN_CHECK(
              cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, input.raw_data(), d.y, grad_out.raw_data(), d.conv,
                                                            d.w, grad_weight.raw_data(), 16, n, perf, ws, bytes));
        });
    DataPtr ws = cudnn_workspace(dev, a.workspace);
    EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, s.one(t), d.x, input.raw_data(), d.y, grad_out.raw_data(),
                                                     d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                                     ws.get(), a.workspace, s.zero(t), d.w, grad_weight.raw_data()));
  }
  if (grad_bias.defined()) {
    TensorDesc bd;
    set_bias_desc(bd, t, g.OC);
    EMBER_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(h, s.one(t), d.y, grad_out.raw_data(), s.zero(t), bd, grad_bias.raw_data()));
  }
}

// cuDNN takes this geometry: float32/float64/bfloat16/float16 and an output size it agrees with.
bool cudnn_can(const ConvGeometry& g, DType t) {
  if (t != DType::Float32 && t != DType::Float64 && t != DType::BFloat16 && t != DType::Float16) return false;
  try {
    ConvDescs d;
    describe(d, g, t);
    return d.ok;
  } catch (const Error&) {
    return false;
  }
}

KernelTimer timer_for(int dev) {
  return [dev](const std::function<void()>& fn) { return time_on_stream(dev, fn); };
}

void cuda_conv_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const ConvGeometry& g) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device());
  const auto native = native_kernel(conv2d_forward_stub, KernelFamily::Conv);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] { native.fn(out, input, weight, bias, g); }};
  KernelCandidate ven{cudnn_can(g, out.dtype()), true, [&] { cudnn_forward(out, input, weight, bias, g); }};
  kernel_selector().run(KernelFamily::Conv, conv_key("fwd", g, out.dtype()), nat, ven, timer_for(out.device().index));
}

void cuda_conv_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                              const Tensor& bias, const ConvGeometry& g) {
  if (grad_input.numel() == 0) return;
  DeviceGuard guard(grad_input.device());
  const auto native = native_kernel(conv2d_backward_input_stub, KernelFamily::Conv);
  KernelCandidate nat{native.fn != nullptr, native.deterministic,
                      [&] { native.fn(grad_input, grad_out, weight, bias, g); }};
  KernelCandidate ven{cudnn_can(g, grad_input.dtype()), true,
                      [&] { cudnn_backward_input(grad_input, grad_out, weight, bias, g); }};
  kernel_selector().run(KernelFamily::Conv, conv_key("bwd_data", g, grad_input.dtype()), nat, ven,
                        timer_for(grad_input.device().index));
}

void cuda_conv_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                               const Tensor& input, const ConvGeometry& g) {
  DeviceGuard guard(grad_out.device());
  const auto native = native_kernel(conv2d_backward_weight_stub, KernelFamily::Conv);
  KernelCandidate nat{native.fn != nullptr, native.deterministic,
                      [&] { native.fn(grad_weight, grad_bias, grad_out, input, g); }};
  KernelCandidate ven{cudnn_can(g, grad_out.dtype()), true,
                      [&] { cudnn_backward_weight(grad_weight, grad_bias, grad_out, input, g); }};
  kernel_selector().run(KernelFamily::Conv, conv_key("bwd_filter", g, grad_out.dtype()), nat, ven,
                        timer_for(grad_out.device().index));
}

}  // namespace

EMBER_REGISTER_KERNEL(conv2d_forward_stub, CUDA, cuda_conv_forward);
EMBER_REGISTER_KERNEL(conv2d_backward_input_stub, CUDA, cuda_conv_backward_input);
EMBER_REGISTER_KERNEL(conv2d_backward_weight_stub, CUDA, cuda_conv_backward_weight);

namespace {
[[maybe_unused]] const bool vendor_registered = [] {
  register_vendor(KernelFamily::Conv);
  return true;
}();
}  // namespace

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
