// The float32 working copies of a float16/bfloat16 recurrent layer's arguments (core/rnn_kernels.h):
// the CPU and CUDA kernels run such a layer in float32 and round its results back once.
#include <span>
#include <utility>
#include <vector>

#include "core/copy.h"
#include "core/rnn_kernels.h"

namespace ember {
namespace {

bool is_16bit(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::BFloat16 || t.dtype() == DType::Float16);
}

// A float32 copy of a 16-bit tensor on its device; any other tensor as it is.
Tensor widen(const Tensor& t) {
  if (!is_16bit(t)) return t;
  Tensor w = empty(t.shape(), {.dtype = DType::Float32, .device = t.device()});
  copy_stub(t.device())(w, t);
  return w;
}

// A float32 tensor for a 16-bit result; any other tensor as it is.
Tensor float32_for(const Tensor& dst) {
  return is_16bit(dst) ? empty(dst.shape(), {.dtype = DType::Float32, .device = dst.device()}) : dst;
}

// The float32 result rounded (to nearest even, by the copy kernel) into its 16-bit destination.
void narrow_into(const Tensor& dst, const Tensor& wide) {
  if (dst.defined() && !dst.is_same(wide)) copy_stub(dst.device())(dst, wide);
}

}  // namespace

std::vector<RnnForwardArgs> rnn_float32_args(std::span<const RnnForwardArgs> dirs) {
  std::vector<RnnForwardArgs> wide(dirs.begin(), dirs.end());
  if (wide.empty()) return wide;
  const Tensor input = widen(dirs[0].input);  // the directions share it: widened once
  const bool to_float32 = is_16bit(dirs[0].ws.gates);
  const std::vector<RnnWorkspace> ws =
      to_float32 ? rnn_workspaces(dirs[0].cfg, dirs.size(), {.dtype = DType::Float32, .device = input.device()})
                 : std::vector<RnnWorkspace>{};
  for (size_t d = 0; d < wide.size(); ++d) {
    RnnForwardArgs& w = wide[d];
    w.input = dirs[d].input.is_same(dirs[0].input) ? input : widen(dirs[d].input);
    for (Tensor* t : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.h0, &w.c0}) *t = widen(*t);
    for (Tensor* t : {&w.output, &w.h_n, &w.c_n}) *t = float32_for(*t);
    if (to_float32) w.ws = ws[d];
  }
  return wide;
}

void rnn_round_results(const RnnForwardArgs& a, const RnnForwardArgs& wide) {
  for (auto [dst, src] : {std::pair{&a.output, &wide.output},
                          {&a.h_n, &wide.h_n},
                          {&a.c_n, &wide.c_n},
                          {&a.ws.gates, &wide.ws.gates},
                          {&a.ws.hs, &wide.ws.hs},
                          {&a.ws.cs, &wide.ws.cs},
                          {&a.ws.ghn, &wide.ws.ghn}})
    narrow_into(*dst, *src);
}

RnnBackwardArgs rnn_float32_args(const RnnBackwardArgs& a) {
  RnnBackwardArgs w = a;
  for (Tensor* t : {&w.input, &w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.ws.gates, &w.ws.hs, &w.ws.cs, &w.ws.ghn,
                    &w.grad_output, &w.grad_h_n, &w.grad_c_n})
    *t = widen(*t);
  for (Tensor* t : {&w.grad_input, &w.grad_w_ih, &w.grad_w_hh, &w.grad_b_ih, &w.grad_b_hh, &w.grad_h0, &w.grad_c0})
    *t = float32_for(*t);
  return w;
}

void rnn_round_results(const RnnBackwardArgs& a, const RnnBackwardArgs& wide) {
  for (auto [dst, src] : {std::pair{&a.grad_input, &wide.grad_input},
                          {&a.grad_w_ih, &wide.grad_w_ih},
                          {&a.grad_w_hh, &wide.grad_w_hh},
                          {&a.grad_b_ih, &wide.grad_b_ih},
                          {&a.grad_b_hh, &wide.grad_b_hh},
                          {&a.grad_h0, &wide.grad_h0},
                          {&a.grad_c0, &wide.grad_c0}})
    narrow_into(*dst, *src);
}

}  // namespace ember
