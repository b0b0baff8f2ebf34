// CPU kernels for the fused recurrent layers (core/rnn_kernels.h).
// Forward: one OpenBLAS GEMM projects the input of every step (biases folded in). The recurrent
// loop then runs in one OpenMP parallel region; each step is split into groups of hidden units,
// and an item multiplies h_{t-1} by its units' slice of W_hh (packed once per call, where a BLAS
// call would repack it at every step) and applies the fused gate math to those units. Backward
// through time splits each step the same way into a phase of fused gate gradients and a phase of
// dh_{t-1} = dG_t W_hh; after the loop single OpenBLAS GEMMs over all steps give d input, dW_ih
// and dW_hh, and GEMVs the bias gradients. float32 uses the vectorised exp/tanh of
// core/cpu/vec_math.h; float64 uses libm so that gradient checks see exact math.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/lowp_reference.h"
#include "core/cpu/panel_gemm.h"
#include "core/cpu/phased_queue.h"
#include "core/cpu/rnn_cells.h"
#include "core/parallel.h"
#include "core/rnn_kernels.h"

namespace ember {

namespace {

using namespace cpu::rnn;    // NOLINT(google-build-using-namespace): the kernel's own helpers
using namespace cpu::panel;  // NOLINT(google-build-using-namespace): its per-step GEMMs
using cpu::PhasedQueue;
using cpu::run_queue;

// ------------------------------------------------------------------ BLAS (row-major)

// C[m, n] = op(A) op(B) + beta C, tolerating empty sizes (BLAS rejects leading dimensions of 0).
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
          T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const auto oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  const int LDA = static_cast<int>(lda), LDB = static_cast<int>(ldb), LDC = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, oa, ob, M, N, K, 1.0f, a, LDA, b, LDB, beta, c, LDC);
  else
    cblas_dgemm(CblasRowMajor, oa, ob, M, N, K, 1.0, a, LDA, b, LDB, beta, c, LDC);
}

// The same in bfloat16 when the layer's tensors were (RnnConfig::bf16_gemms).
template <typename T>
void gemm(const RnnConfig& cfg, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    if (cfg.bf16_gemms && k > 0) return cpu::sgemm_as_bf16(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  gemm<T>(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

// y[n] = column sums of A[m, n].
template <typename T>
void column_sums(int64_t m, int64_t n, const T* a, T* y) {
  if (n == 0) return;
  if (m == 0) {
    std::fill(y, y + n, T(0));
    return;
  }
  std::vector<T> ones(static_cast<size_t>(m), T(1));
  const int M = static_cast<int>(m), N = static_cast<int>(n);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, CblasTrans, M, N, 1.0f, a, N, ones.data(), 1, 0.0f, y, 1);
  else
    cblas_dgemv(CblasRowMajor, CblasTrans, M, N, 1.0, a, N, ones.data(), 1, 0.0, y, 1);
}

// ------------------------------------------------------------------ threads

bool in_parallel() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

// ------------------------------------------------------------------ sequence loops

// A phase's items are groups of hidden-unit panels: an item computes the GEMM columns of its
// units (in every gate) and then their gate math, so the items of a step are independent. There
// are a few per thread, for balance, and more when a step is large, so that an item stays well
// under PhasedQueue's stall limit (16M multiply-adds: about 0.2 ms on one core).
struct UnitGroups {
  int64_t H, panels, count;
  UnitGroups(int64_t h, int64_t step_macs, int nthreads)
      : H(h),
        panels(panel_count(h)),
        count(std::min(panels, std::max<int64_t>(4 * nthreads, step_macs / (int64_t{1} << 24) + 1))) {}
  int64_t q0(int64_t item) const { return panels * item / count; }  // panels [q0, q1)
  int64_t q1(int64_t item) const { return panels * (item + 1) / count; }
  int64_t u0(int64_t item) const { return std::min(H, q0(item) * kPanel); }  // units [u0, u1)
  int64_t u1(int64_t item) const { return std::min(H, q1(item) * kPanel); }
};

// Threads for the recurrent loop: one when a step is too small for sharing it to pay off.
int recurrent_threads(int64_t B, int64_t H, int64_t G) {
  if (B * G * H * H < 262144 || in_parallel()) return 1;
  return get_num_threads();
}

// The input projection of every step in one GEMM into gates [T * B, G * H], biases folded in.
// Returns GRU's b_hn, which is kept apart because r multiplies it (empty for the other modes).
template <typename T>
std::vector<T> input_projection(const RnnForwardArgs& a, T* gates) {
  const RnnConfig& cfg = a.cfg;
  const int64_t H = cfg.H, GH = rnn_gate_count(cfg.mode) * H;
  const bool gru = cfg.mode == RnnMode::Gru;
  std::vector<T> bias(static_cast<size_t>(GH), T(0)), b_hn(gru ? static_cast<size_t>(H) : 0, T(0));
  const bool has_bias = a.b_ih.defined() || a.b_hh.defined();
  if (a.b_ih.defined()) {
    const T* b = a.b_ih.data_ptr<T>();
    for (int64_t k = 0; k < GH; ++k) bias[k] += b[k];
  }
  if (a.b_hh.defined()) {
    const T* b = a.b_hh.data_ptr<T>();
    const int64_t folded = gru ? 2 * H : GH;
    for (int64_t k = 0; k < folded; ++k) bias[k] += b[k];
    if (gru)
      for (int64_t k = 0; k < H; ++k) b_hn[k] = b[2 * H + k];
  }
  const int64_t rows = cfg.T * cfg.B;
  if (has_bias) {
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / GH), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::memcpy(gates + r * GH, bias.data(), sizeof(T) * GH);
    });
  }
  gemm<T>(cfg, false, true, rows, GH, cfg.I, a.input.data_ptr<T>(), cfg.I, a.w_ih.data_ptr<T>(), cfg.I,
          has_bias ? T(1) : T(0), gates, GH);
  return b_hn;
}

// The states before the first step (h0 and, for LSTM, c0; zeros where not given) into their slots.
template <typename T>
void initial_states(const RnnForwardArgs& a, const RnnSteps& steps, T* hs, T* cs) {
  const int64_t BH = a.cfg.B * a.cfg.H;
  T* h_first = hs + steps.first_slot() * BH;
  if (a.h0.defined())
    std::memcpy(h_first, a.h0.data_ptr<T>(), sizeof(T) * BH);
  else
    std::fill(h_first, h_first + BH, T(0));
  if (cs) {
    T* c_first = cs + steps.first_slot() * BH;
    if (a.c0.defined())
      std::memcpy(c_first, a.c0.data_ptr<T>(), sizeof(T) * BH);
    else
      std::fill(c_first, c_first + BH, T(0));
  }
}

template <typename T>
void forward_impl(const RnnForwardArgs& a) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const bool relu = cfg.mode == RnnMode::RnnRelu;
  const RnnSteps steps{Tn, cfg.reverse};
  const bool all_full = cfg.lengths.empty();
  const int64_t* len = cfg.lengths.data();
  const TensorOptions opts{a.input.dtype(), a.input.device()};

  const T* w_hh = a.w_hh.data_ptr<T>();
  T* gates = a.ws.gates.data_ptr<T>();
  T* hs = a.ws.hs.data_ptr<T>();
  T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  T* out = a.output.data_ptr<T>();

  const std::vector<T> b_hn = input_projection<T>(a, gates);
  const int64_t BH = B * H;
  initial_states<T>(a, steps, hs, cs);

  // Packed W_hh^T: panel (g, q) holds gate g's units [kPanel q, kPanel (q + 1)) as columns, K = H rows.
  const int64_t QP = panel_count(H);
  Tensor packed = empty({G * QP * H * kPanel}, opts);
  T* pk = packed.data_ptr<T>();
  Tensor gh_buf = gru ? empty({B, GH}, opts) : Tensor();
  T* gh = gru ? gh_buf.data_ptr<T>() : nullptr;

  // Phase 0 packs W_hh; phase 1 + s runs step s.
  const int nthreads = recurrent_threads(B, H, G);
  const UnitGroups groups(H, B * G * H * H, nthreads);
  PhasedQueue queue(1 + Tn, groups.count);
  run_queue(nthreads, queue, [&](int64_t phase, int64_t item) {
    const int64_t q0 = groups.q0(item), q1 = groups.q1(item), u0 = groups.u0(item), nu = groups.u1(item) - u0;
    if (phase == 0) {
      for (int64_t g = 0; g < G; ++g)
        pack_panels<T>(H, H, q0, q1, pk + g * QP * H * kPanel,
                       [&](int64_t k, int64_t u) { return w_hh[(g * H + u) * H + k]; });
      return;
    }
    const int64_t t = steps.time(phase - 1);
    const T* hp = hs + steps.prev_slot(t) * BH;
    T* hn = hs + steps.next_slot(t) * BH;
    T* gt = gates + t * B * GH;
    T* ot = out + t * BH;
    const T* cp = lstm ? cs + steps.prev_slot(t) * BH : nullptr;
    T* cn = lstm ? cs + steps.next_slot(t) * BH : nullptr;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t q = q0; q < q1; ++q)
        gemm_panel<T>(B, H, hp, H, pk + (g * QP + q) * H * kPanel, (gru ? gh : gt) + g * H + q * kPanel, GH,
                      std::min(kPanel, H - q * kPanel), !gru);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t o = b * H + u0;
      if (!all_full && t >= len[b]) {  // padding: carry the state, output zeros
        std::memcpy(hn + o, hp + o, sizeof(T) * nu);
        if (lstm) std::memcpy(cn + o, cp + o, sizeof(T) * nu);
        std::fill(ot + o, ot + o + nu, T(0));
        continue;
      }
      T* gb = gt + b * GH + u0;
      switch (cfg.mode) {
        case RnnMode::Lstm:
          lstm_row<T>(H, nu, gb, cp + o, cn + o, hn + o, ot + o);
          break;
        case RnnMode::Gru:
          gru_row<T>(H, nu, gb, gh + b * GH + u0, b_hn.data() + u0, hp + o, ghn + t * BH + o, hn + o, ot + o);
          break;
        default:
          rnn_row<T>(relu, nu, gb, hn + o, ot + o);
      }
    }
  });
  std::memcpy(a.h_n.data_ptr<T>(), hs + steps.last_slot() * BH, sizeof(T) * BH);
  if (lstm) std::memcpy(a.c_n.data_ptr<T>(), cs + steps.last_slot() * BH, sizeof(T) * BH);
}

// The recurrence run backward, last step first: the gate gradients of every step into dgx (of
// the input-side pre-activations) and dgh (of the hidden-side ones; the same buffer but for GRU),
// the state gradients dh and dc carried from step to step; dh ends as dh_0 when need_dh0.
template <typename T>
void recurrent_backward(const RnnBackwardArgs& a, T* dgx, T* dgh, std::vector<T>& dh, std::vector<T>& dc,
                        bool need_dh0) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const bool relu = cfg.mode == RnnMode::RnnRelu;
  const RnnSteps steps{Tn, cfg.reverse};
  const bool all_full = cfg.lengths.empty();
  const int64_t* len = cfg.lengths.data();
  const int64_t BH = B * H;
  const TensorOptions opts{a.input.dtype(), a.input.device()};

  const T* w_hh = a.w_hh.data_ptr<T>();
  const T* gates = a.ws.gates.data_ptr<T>();
  const T* hs = a.ws.hs.data_ptr<T>();
  const T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  const T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  const T* dout = a.grad_output.data_ptr<T>();

  // Packed W_hh: panel q holds units [kPanel q, kPanel (q + 1)) as columns, K = G*H rows.
  const int64_t QP = panel_count(H);
  Tensor packed = empty({QP * GH * kPanel}, opts);
  T* pk = packed.data_ptr<T>();
  // Phase 0 packs W_hh; then per step, last first, a phase of gate gradients (dG_t for the item's
  // units) and a phase of dh_{t-1} += dG_t W_hh (the item's units, reading every unit's dG_t).
  // The very last product is dh_0, needed only for h0's gradient.
  const int nthreads = recurrent_threads(B, H, G);
  const UnitGroups groups(H, B * G * H * H, nthreads);
  PhasedQueue queue(2 * Tn + (need_dh0 ? 1 : 0), groups.count);
  run_queue(nthreads, queue, [&](int64_t phase, int64_t item) {
    const int64_t q0 = groups.q0(item), q1 = groups.q1(item), u0 = groups.u0(item), nu = groups.u1(item) - u0;
    if (phase == 0) {
      pack_panels<T>(GH, H, q0, q1, pk, [&](int64_t k, int64_t u) { return w_hh[k * H + u]; });
      return;
    }
    const int64_t t = steps.time(Tn - 1 - (phase - 1) / 2);
    T* dght = dgh + t * B * GH;
    if ((phase - 1) % 2 == 1) {
      for (int64_t q = q0; q < q1; ++q)
        gemm_panel<T>(B, GH, dght, GH, pk + q * GH * kPanel, dh.data() + q * kPanel, H,
                      std::min(kPanel, H - q * kPanel), true);
      return;
    }
    const int64_t pslot = steps.prev_slot(t), nslot = steps.next_slot(t);
    const T* gt = gates + t * B * GH;
    const T* dot = dout + t * BH;
    T* dgxt = dgx + t * B * GH;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t o = b * H + u0, go = b * GH + u0;
      if (!all_full && t >= len[b]) {  // padding: gradients pass through to the carried state
        for (int64_t g = 0; g < G; ++g) {
          std::fill(dgxt + go + g * H, dgxt + go + g * H + nu, T(0));
          if (gru) std::fill(dght + go + g * H, dght + go + g * H + nu, T(0));
        }
        continue;
      }
      switch (cfg.mode) {
        case RnnMode::Lstm:
          lstm_row_backward<T>(H, nu, gt + go, cs + pslot * BH + o, cs + nslot * BH + o, dot + o, dh.data() + o,
                               dc.data() + o, dgxt + go);
          break;
        case RnnMode::Gru:
          gru_row_backward<T>(H, nu, gt + go, ghn + t * BH + o, hs + pslot * BH + o, dot + o, dh.data() + o, dgxt + go,
                              dght + go);
          break;
        default:
          rnn_row_backward<T>(relu, nu, gt + go, dot + o, dh.data() + o, dgxt + go);
      }
    }
  });
}

// The gradients of the input, the weights and the biases from the gate gradients of every step.
template <typename T>
void parameter_gradients(const RnnBackwardArgs& a, const T* dgx, const T* dgh) {
  const RnnConfig& cfg = a.cfg;
  const int64_t I = cfg.I, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, BH = cfg.B * H, rows = cfg.T * cfg.B;
  const bool gru = cfg.mode == RnnMode::Gru;
  const T* x = a.input.data_ptr<T>();
  const T* w_ih = a.w_ih.data_ptr<T>();
  const T* hs = a.ws.hs.data_ptr<T>();
  if (a.grad_input.defined())
    gemm<T>(cfg, false, false, rows, I, GH, dgx, GH, w_ih, I, T(0), a.grad_input.data_ptr<T>(), I);
  if (a.grad_w_ih.defined()) gemm<T>(cfg, true, false, GH, I, rows, dgx, GH, x, I, T(0), a.grad_w_ih.data_ptr<T>(), I);
  if (a.grad_w_hh.defined()) {
    const T* h_prev = hs + (cfg.reverse ? BH : 0);  // the states before each step, in time order
    gemm<T>(cfg, true, false, GH, H, rows, dgh, GH, h_prev, H, T(0), a.grad_w_hh.data_ptr<T>(), H);
  }
  if (a.grad_b_ih.defined()) column_sums<T>(rows, GH, dgx, a.grad_b_ih.data_ptr<T>());
  if (a.grad_b_hh.defined()) {
    if (!gru && a.grad_b_ih.defined())
      std::memcpy(a.grad_b_hh.data_ptr<T>(), a.grad_b_ih.data_ptr<T>(), sizeof(T) * GH);
    else
      column_sums<T>(rows, GH, dgh, a.grad_b_hh.data_ptr<T>());
  }
}

template <typename T>
void backward_impl(const RnnBackwardArgs& a) {
  const RnnConfig& cfg = a.cfg;
  const int64_t GH = rnn_gate_count(cfg.mode) * cfg.H, BH = cfg.B * cfg.H, rows = cfg.T * cfg.B;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const TensorOptions opts{a.input.dtype(), a.input.device()};

  // dgx: gradients of the input-side pre-activations; dgh: of the hidden-side ones (they differ
  // only for GRU's n gate, where r multiplies W_hn h + b_hn). Every row is written below.
  Tensor dgx_buf = empty({rows, GH}, opts), dgh_buf = gru ? empty({rows, GH}, opts) : dgx_buf;
  T* dgx = dgx_buf.data_ptr<T>();
  T* dgh = dgh_buf.data_ptr<T>();
  std::vector<T> dh(a.grad_h_n.data_ptr<T>(), a.grad_h_n.data_ptr<T>() + BH);
  std::vector<T> dc(lstm ? static_cast<size_t>(BH) : 0);
  if (lstm) std::memcpy(dc.data(), a.grad_c_n.data_ptr<T>(), sizeof(T) * BH);
  const bool need_dh0 = a.grad_h0.defined();

  recurrent_backward<T>(a, dgx, dgh, dh, dc, need_dh0);
  if (need_dh0) std::memcpy(a.grad_h0.data_ptr<T>(), dh.data(), sizeof(T) * BH);
  if (a.grad_c0.defined()) std::memcpy(a.grad_c0.data_ptr<T>(), dc.data(), sizeof(T) * BH);
  parameter_gradients<T>(a, dgx, dgh);
}

// float16/bfloat16 layers (rnn_float32_args, core/rnn_kernels.h): the whole layer in float32, its
// outputs and workspace rounded back; for bfloat16 the input-side GEMMs, which carry most of the FLOPs, take
// bfloat16 operands (vdpbf16ps where the CPU has it).
void rnn_forward_lowp(const RnnForwardArgs& a) {
  RnnForwardArgs w = rnn_float32_args(std::span{&a, 1})[0];
  w.cfg.bf16_gemms = a.input.dtype() == DType::BFloat16;
  forward_impl<float>(w);
  rnn_round_results(a, w);
}

void rnn_backward_lowp(const RnnBackwardArgs& a) {
  RnnBackwardArgs w = rnn_float32_args(a);
  w.cfg.bf16_gemms = a.input.dtype() == DType::BFloat16;
  backward_impl<float>(w);
  rnn_round_results(a, w);
}

void forward_direction(const RnnForwardArgs& a) {
  if (cpu::lowp::is_16bit(a.input.dtype())) return rnn_forward_lowp(a);
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { forward_impl<scalar_t>(a); });
}

void backward_direction(const RnnBackwardArgs& a) {
  if (cpu::lowp::is_16bit(a.input.dtype())) return rnn_backward_lowp(a);
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { backward_impl<scalar_t>(a); });
}

// A layer's two directions at two threads run at once, one thread each, each as a call of its own
// (through the stub, so that the dispatch shows the thread): their kernels see a parallel region
// and stay on their thread, OpenBLAS's GEMMs included; the halves are equal, and no step waits for
// the other thread, where one direction on two threads hands over twice per step (BiLSTM, B 32,
// H 64: bench/RESULTS.md). With more threads each direction has all of them in turn: one thread
// per direction would leave the rest idle. False when the directions are to run in turn.
template <typename F>
bool directions_at_once(size_t n, const F& one) {
  if (n != 2 || threads_here() != 2) return false;
  std::exception_ptr failed[2];  // an exception must not leave an OpenMP region
  parallel_slots(2, 2, [&](int slot, int64_t, int64_t) {
    try {
      one(static_cast<size_t>(slot));
    } catch (...) {
      failed[slot] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  return true;
}

void cpu_rnn_forward(std::span<const RnnForwardArgs> dirs) {
  if (directions_at_once(dirs.size(), [&](size_t d) { rnn_forward_stub(Device::cpu())(dirs.subspan(d, 1)); })) return;
  for (const RnnForwardArgs& a : dirs) forward_direction(a);
}

void cpu_rnn_backward(std::span<const RnnBackwardArgs> dirs) {
  if (directions_at_once(dirs.size(), [&](size_t d) { rnn_backward_stub(Device::cpu())(dirs.subspan(d, 1)); })) return;
  for (const RnnBackwardArgs& a : dirs) backward_direction(a);
}

}  // namespace

EMBER_REGISTER_KERNEL(rnn_forward_stub, CPU, cpu_rnn_forward);
EMBER_REGISTER_KERNEL(rnn_backward_stub, CPU, cpu_rnn_backward);

}  // namespace ember
