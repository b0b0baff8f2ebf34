// Recurrent layers on CUDA: the choosers registered as rnn_forward_stub's and rnn_backward_stub's
// CUDA kernels, and cuDNN's RNN (the v8 API: cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8) as the vendor implementation of one unidirectional layer, with
// variable lengths through cuDNN's padded layout. PyTorch's gate order is cuDNN's (LSTM i, f, g,
// o; GRU r, z, n) with two bias vectors, so Ember's weights are copied into cuDNN's weight space
// gate by gate.
//
// Ember's RnnWorkspace has no room for cuDNN's reserve space, so the vendor forward runs in
// inference mode and the vendor backward re-runs the forward in training mode to rebuild it (one
// extra forward per backward). The vendor forward writes the initial states into the workspace
// (which is all the vendor backward reads from it) and fills the gates with NaN, so a native
// backward after a vendor forward gives NaN rather than silently wrong gradients; forward and
// backward of a shape share one kernel-choice key, so `auto` keeps them on the same side.
// Reverse-direction layers run the native kernels only. Ran on a lent H200 (2026-12-04: the op
// table's cuda_vendor rows, bench_gpu); scripts/gpu-check.sh checks it against the CPU each time.
#include "core/cuda/cudnn_common.h"

#if EMBER_WITH_CUDNN

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // see cudnn_common.h

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/native_kernels.h"
#include "core/kernel_choice.h"
#include "core/rnn_kernels.h"

namespace ember::cuda {
namespace {

EMBER_CUDNN_DESCRIPTOR(RnnDesc, cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor);
EMBER_CUDNN_DESCRIPTOR(RnnDataDesc, cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                       cudnnDestroyRNNDataDescriptor);
EMBER_CUDNN_DESCRIPTOR(DropoutDesc, cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                       cudnnDestroyDropoutDescriptor);

cudnnRNNMode_t cell_mode(RnnMode m) {
  switch (m) {
    case RnnMode::Lstm:
      return CUDNN_LSTM;
    case RnnMode::Gru:
      return CUDNN_GRU;
    case RnnMode::RnnRelu:
      return CUDNN_RNN_RELU;
    default:
      return CUDNN_RNN_TANH;
  }
}

// A dropout descriptor (probability 0: one layer has no dropout, but cuDNN wants one) per device
// and thread, with its RNG states, made once.
cudnnDropoutDescriptor_t no_dropout(int dev) {
  struct Entry {
    DropoutDesc desc;
    DataPtr states;
  };
  thread_local std::map<int, Entry*> entries;  // leaked with the thread, as the handles
  Entry*& e = entries[dev];
  if (!e) {
    e = new Entry();
    size_t bytes = 0;
    EMBER_CUDNN_CHECK(cudnnDropoutGetStatesSize(cudnn_handle(dev), &bytes));
    e->states = cudnn_workspace(dev, bytes);
    EMBER_CUDNN_CHECK(cudnnSetDropoutDescriptor(e->desc, cudnn_handle(dev), 0.0f, e->states.get(), bytes, 0));
  }
  return e->desc;
}

// Everything one cuDNN call over a layer needs; the weight space holds Ember's weights.
struct Setup {
  int dev = 0;
  DType t = DType::Float32;
  int64_t G = 1;
  RnnDesc rnn;
  RnnDataDesc x, y;
  TensorDesc h;
  std::vector<int> lengths;
  DataPtr dev_lengths;
  size_t weight_bytes = 0;
  DataPtr weights;
  double fill_d = 0.0;
  float fill_f = 0.0f;
};

void* weight_param(Setup& s, void* space, int lin_layer, bool bias) {
  TensorDesc m, b;
  void* m_addr = nullptr;
  void* b_addr = nullptr;
  EMBER_CUDNN_CHECK(
      cudnnGetRNNWeightParams(cudnn_handle(s.dev), s.rnn, 0, s.weight_bytes, space, lin_layer, m, &m_addr, b, &b_addr));
  return bias ? b_addr : m_addr;
}

// Copies gate g's rows of Ember's [G*H, K] matrix (or [G*H] bias) to or from cuDNN's space.
void move_gates(Setup& s, void* space, const Tensor& w, int lin_base, bool bias, int64_t H, bool to_cudnn) {
  if (!w.defined()) return;
  const size_t item = w.itemsize();
  const size_t gate_bytes = static_cast<size_t>(w.numel() / s.G) * item;
  cudaStream_t stream = raw(current_stream(s.dev));
  for (int64_t g = 0; g < s.G; ++g) {
    char* cud = static_cast<char*>(weight_param(s, space, lin_base + static_cast<int>(g), bias));
    char* emb = static_cast<char*>(w.raw_data()) + g * gate_bytes;
    EMBER_CHECK(cud, "rnn (cuDNN): no ", bias ? "bias" : "matrix", " for gate ", g);
    EMBER_CUDA_CHECK(
        cudaMemcpyAsync(to_cudnn ? cud : emb, to_cudnn ? emb : cud, gate_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  (void)H;
}

void setup(Setup& s, const RnnConfig& cfg, DType t, int dev, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
           const Tensor& b_hh) {
  s.dev = dev;
  s.t = t;
  s.G = rnn_gate_count(cfg.mode);
  const cudnnDataType_t dt = cudnn_dtype(t);
  EMBER_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      s.rnn, CUDNN_RNN_ALGO_STANDARD, cell_mode(cfg.mode), CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
      CUDNN_LINEAR_INPUT, dt, dt, t == DType::Float32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH, static_cast<int>(cfg.I),
      static_cast<int>(cfg.H), static_cast<int>(cfg.H), 1, no_dropout(dev), CUDNN_RNN_PADDED_IO_ENABLED));
  s.lengths.assign(static_cast<size_t>(cfg.B), static_cast<int>(cfg.T));
  for (size_t b = 0; b < cfg.lengths.size(); ++b) s.lengths[b] = static_cast<int>(cfg.lengths[b]);
  void* fill = t == DType::Float64 ? static_cast<void*>(&s.fill_d) : static_cast<void*>(&s.fill_f);
  EMBER_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.x, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                              static_cast<int>(cfg.T), static_cast<int>(cfg.B), static_cast<int>(cfg.I),
                                              s.lengths.data(), fill));
  EMBER_CUDNN_CHECK(cudnnSetRNNDataDescriptor(s.y, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                              static_cast<int>(cfg.T), static_cast<int>(cfg.B), static_cast<int>(cfg.H),
                                              s.lengths.data(), fill));
  const int dims[3] = {1, static_cast<int>(cfg.B), static_cast<int>(cfg.H)};
  const int strides[3] = {static_cast<int>(cfg.B * cfg.H), static_cast<int>(cfg.H), 1};
  EMBER_CUDNN_CHECK(cudnnSetTensorNdDescriptor(s.h, dt, 3, dims, strides));
  cudaStream_t stream = raw(current_stream(dev));
  s.dev_lengths = cudnn_workspace(dev, s.lengths.size() * sizeof(int));
  EMBER_CUDA_CHECK(cudaMemcpyAsync(s.dev_lengths.get(), s.lengths.data(), s.lengths.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
  EMBER_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(cudnn_handle(dev), s.rnn, &s.weight_bytes));
  s.weights = cudnn_workspace(dev, s.weight_bytes);
  // Undefined biases are zeros: clear the space, then copy what is given.
  EMBER_CUDA_CHECK(cudaMemsetAsync(s.weights.get(), 0, s.weight_bytes, stream));
  move_gates(s, s.weights.get(), w_ih, 0, false, cfg.H, true);
  move_gates(s, s.weights.get(), w_hh, static_cast<int>(s.G), false, cfg.H, true);
  move_gates(s, s.weights.get(), b_ih, 0, true, cfg.H, true);
  move_gates(s, s.weights.get(), b_hh, static_cast<int>(s.G), true, cfg.H, true);
  // The host lengths array must outlive the copy above; it lives in `s`, which the caller keeps
  // until its cuDNN calls are queued, and pageable copies are staged before they return.
}

const void* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}
void* mut_or_null(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

void cudnn_forward(const RnnForwardArgs& a) {
  NoGradGuard no_grad;
  const int dev = a.input.device().index;
  DeviceGuard guard(a.input.device());
  Setup s;
  setup(s, a.cfg, a.input.dtype(), dev, a.w_ih, a.w_hh, a.b_ih, a.b_hh);
  const bool lstm = a.cfg.mode == RnnMode::Lstm;
  size_t work = 0, reserve = 0;
  cudnnHandle_t h = cudnn_handle(dev);
  EMBER_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, s.rnn, CUDNN_FWD_MODE_INFERENCE, s.x, &work, &reserve));
  DataPtr ws = cudnn_workspace(dev, work);
  EMBER_CUDNN_CHECK(cudnnRNNForward(
      h, s.rnn, CUDNN_FWD_MODE_INFERENCE, static_cast<const int32_t*>(s.dev_lengths.get()), s.x, a.input.raw_data(),
      s.y, a.output.raw_data(), s.h, ptr_or_null(a.h0), a.h_n.raw_data(), s.h, lstm ? ptr_or_null(a.c0) : nullptr,
      lstm ? a.c_n.raw_data() : nullptr, s.weight_bytes, s.weights.get(), work, ws.get(), 0, nullptr));
  // What the vendor backward reads: the initial states in slot 0.
  Tensor h0_slot = a.ws.hs.select(0, 0);
  if (a.h0.defined())
    h0_slot.copy_(a.h0);
  else
    h0_slot.fill_(0.0);
  if (lstm) {
    Tensor c0_slot = a.ws.cs.select(0, 0);
    if (a.c0.defined())
      c0_slot.copy_(a.c0);
    else
      c0_slot.fill_(0.0);
  }
  Tensor gates = a.ws.gates;  // a handle: fill_ is not const
  gates.fill_(NAN);           // see the header comment
}

void cudnn_backward(const RnnBackwardArgs& a) {
  NoGradGuard no_grad;
  const int dev = a.input.device().index;
  DeviceGuard guard(a.input.device());
  const DType t = a.input.dtype();
  const RnnConfig& cfg = a.cfg;
  const bool lstm = cfg.mode == RnnMode::Lstm;
  Setup s;
  setup(s, cfg, t, dev, a.w_ih, a.w_hh, a.b_ih, a.b_hh);
  cudnnHandle_t h = cudnn_handle(dev);
  const Tensor h0 = a.ws.hs.select(0, 0).contiguous();
  const Tensor c0 = lstm ? a.ws.cs.select(0, 0).contiguous() : Tensor();
  const TensorOptions opts{t, a.input.device()};
  // Re-run forward in training mode for cuDNN's reserve space.
  size_t work = 0, reserve = 0;
  EMBER_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(h, s.rnn, CUDNN_FWD_MODE_TRAINING, s.x, &work, &reserve));
  DataPtr ws = cudnn_workspace(dev, work), rs = cudnn_workspace(dev, reserve);
  Tensor y = empty({cfg.T, cfg.B, cfg.H}, opts), hy = empty({cfg.B, cfg.H}, opts);
  Tensor cy = lstm ? empty({cfg.B, cfg.H}, opts) : Tensor();
  const auto* lens = static_cast<const int32_t*>(s.dev_lengths.get());
  EMBER_CUDNN_CHECK(cudnnRNNForward(h, s.rnn, CUDNN_FWD_MODE_TRAINING, lens, s.x, a.input.raw_data(), s.y, y.raw_data(),
                                    s.h, h0.raw_data(), hy.raw_data(), s.h, ptr_or_null(c0), mut_or_null(cy),
                                    s.weight_bytes, s.weights.get(), work, ws.get(), reserve, rs.get()));
  const Tensor dx = a.grad_input.defined() ? a.grad_input : empty({cfg.T, cfg.B, cfg.I}, opts);
  EMBER_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      h, s.rnn, lens, s.y, y.raw_data(), a.grad_output.raw_data(), s.x, dx.raw_data(), s.h, h0.raw_data(),
      ptr_or_null(a.grad_h_n), mut_or_null(a.grad_h0), s.h, ptr_or_null(c0), lstm ? ptr_or_null(a.grad_c_n) : nullptr,
      lstm ? mut_or_null(a.grad_c0) : nullptr, s.weight_bytes, s.weights.get(), work, ws.get(), reserve, rs.get()));
  if (!a.grad_w_ih.defined() && !a.grad_w_hh.defined() && !a.grad_b_ih.defined() && !a.grad_b_hh.defined()) return;
  DataPtr dw = cudnn_workspace(dev, s.weight_bytes);
  EMBER_CUDA_CHECK(cudaMemsetAsync(dw.get(), 0, s.weight_bytes, raw(current_stream(dev))));
  EMBER_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(h, s.rnn, CUDNN_WGRAD_MODE_ADD, lens, s.x, a.input.raw_data(), s.h,
                                               h0.raw_data(), s.y, y.raw_data(), s.weight_bytes, dw.get(), work,
                                               ws.get(), reserve, rs.get()));
  move_gates(s, dw.get(), a.grad_w_ih, 0, false, cfg.H, false);
  move_gates(s, dw.get(), a.grad_w_hh, static_cast<int>(s.G), false, cfg.H, false);
  move_gates(s, dw.get(), a.grad_b_ih, 0, true, cfg.H, false);
  move_gates(s, dw.get(), a.grad_b_hh, static_cast<int>(s.G), true, cfg.H, false);
}

bool cudnn_can(const RnnConfig& cfg, DType t) {
  if (t != DType::Float32 && t != DType::Float64) return false;
  if (cfg.reverse || cfg.T <= 0 || cfg.B <= 0) return false;
  for (int64_t v : {cfg.T, cfg.B, cfg.I, cfg.H, cfg.T * cfg.B * std::max(cfg.I, cfg.H)})
    if (v > INT_MAX) return false;
  return true;
}

// Forward and backward share the key, so that `auto`'s cached pick keeps them on one side.
std::string rnn_key(const RnnConfig& cfg, DType t) {
  std::string k = ::ember::detail::concat(static_cast<int>(cfg.mode), " ", dtype_name(t), " T=", cfg.T, " B=", cfg.B,
                                          " I=", cfg.I, " H=", cfg.H, cfg.reverse ? " rev" : "");
  if (!cfg.lengths.empty()) {
    k += " len=";
    for (int64_t l : cfg.lengths) k += std::to_string(l) + ",";
  }
  return k;
}

KernelTimer timer_for(int dev) {
  return [dev](const std::function<void()>& fn) { return time_on_stream(dev, fn); };
}

// Every direction of the layer on one side: the native kernels run them together (core/cuda/rnn.cu),
// cuDNN one call per direction.
template <typename Args>
bool cudnn_can_all(std::span<const Args> dirs) {
  return std::all_of(dirs.begin(), dirs.end(), [](const Args& a) { return cudnn_can(a.cfg, a.input.dtype()); });
}

template <typename Args>
std::string layer_key(std::span<const Args> dirs) {
  return rnn_key(dirs[0].cfg, dirs[0].input.dtype()) + (dirs.size() > 1 ? " x" + std::to_string(dirs.size()) : "");
}

void cuda_rnn_forward(std::span<const RnnForwardArgs> dirs) {
  if (dirs.empty()) return;
  DeviceGuard guard(dirs[0].input.device());
  const auto native = native_kernel(rnn_forward_stub, KernelFamily::Rnn);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] { native.fn(dirs); }};
  KernelCandidate ven{cudnn_can_all(dirs), true, [&] {
                        for (const RnnForwardArgs& a : dirs) cudnn_forward(a);
                      }};
  kernel_selector().run(KernelFamily::Rnn, layer_key(dirs), nat, ven, timer_for(dirs[0].input.device().index));
}

void cuda_rnn_backward(std::span<const RnnBackwardArgs> dirs) {
  if (dirs.empty()) return;
  DeviceGuard guard(dirs[0].input.device());
  const auto native = native_kernel(rnn_backward_stub, KernelFamily::Rnn);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] { native.fn(dirs); }};
  KernelCandidate ven{cudnn_can_all(dirs), true, [&] {
                        for (const RnnBackwardArgs& a : dirs) cudnn_backward(a);
                      }};
  // Not timed: the pick must be the forward's (cached under the same key under `auto`).
  kernel_selector().run(KernelFamily::Rnn, layer_key(dirs), nat, ven, timer_for(dirs[0].input.device().index),
                        /*may_time=*/false);
}

}  // namespace

EMBER_REGISTER_KERNEL(rnn_forward_stub, CUDA, cuda_rnn_forward);
EMBER_REGISTER_KERNEL(rnn_backward_stub, CUDA, cuda_rnn_backward);

namespace {
[[maybe_unused]] const bool vendor_registered = [] {
  register_vendor(KernelFamily::Rnn);
  return true;
}();
}  // namespace

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
