// CPU kernels for the fused recurrent layers (core/rnn_kernels.h). Forward: one GEMM projects the
// input of every step (biases folded in), then per step one GEMM h_{t-1} W_hh^T and a fused gate
// kernel (nonlinearities and state update) threaded over the batch. Backward through time: per
// step a fused gate-gradient kernel and one GEMM for dh_{t-1}; then single GEMMs over all steps
// for d input, dW_ih and dW_hh, and GEMVs for the bias gradients. float32 uses vectorisable
// approximations of exp/tanh (about 1e-7 relative error); float64 uses libm so that gradient
// checks see exact math.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "core/rnn_kernels.h"

namespace ember {

EMBER_DEFINE_STUB(rnn_forward_stub, RnnForwardFn);
EMBER_DEFINE_STUB(rnn_backward_stub, RnnBackwardFn);

namespace {

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

// ------------------------------------------------------------------ activations

// exp for float without libm, so that loops over it vectorise: exp(x) = 2^n e^r with
// |r| <= ln2/2, a degree-6 polynomial for e^r (Cephes expf) and 2^n built in the exponent bits.
// Inputs are clamped to where the result is a normal float.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kMagic);
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}

inline float fast_sigmoid(float x) {
  return 1.0f / (1.0f + fast_exp(-x));
}

// Cephes tanhf: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), else through exp.
inline float fast_tanh(float x) {
  const float ax = std::abs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (fast_exp(2.0f * ax) + 1.0f);
  const float sbig = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : sbig;
}

template <typename T>
inline T sigmoid_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_sigmoid(x);
  else
    return T(1) / (T(1) + std::exp(-x));
}

template <typename T>
inline T tanh_of(T x) {
  if constexpr (std::is_same_v<T, float>)
    return fast_tanh(x);
  else
    return std::tanh(x);
}

// ------------------------------------------------------------------ per-row cells

// One batch row of one step. `g` holds the pre-activations on entry and the activations on exit.
template <typename T>
inline void lstm_row(int64_t H, T* __restrict g, const T* __restrict cp, T* __restrict cn, T* __restrict hn,
                     T* __restrict out) {
  T* gi = g;
  T* gf = g + H;
  T* gg = g + 2 * H;
  T* go = g + 3 * H;
  for (int64_t j = 0; j < H; ++j) {
    const T i = sigmoid_of(gi[j]), f = sigmoid_of(gf[j]), c_in = tanh_of(gg[j]), o = sigmoid_of(go[j]);
    const T c = f * cp[j] + i * c_in;
    const T h = o * tanh_of(c);
    gi[j] = i;
    gf[j] = f;
    gg[j] = c_in;
    go[j] = o;
    cn[j] = c;
    hn[j] = h;
    out[j] = h;
  }
}

// `gx` holds W_i x + b_i (+ b_hr, b_hz for r and z) on entry and r, z, n on exit; `gh` holds
// W_hh h_{t-1} without bias.
template <typename T>
inline void gru_row(int64_t H, T* __restrict gx, const T* __restrict gh, const T* __restrict b_hn,
                    const T* __restrict hp, T* __restrict hn_lin, T* __restrict hn, T* __restrict out) {
  for (int64_t j = 0; j < H; ++j) {
    const T r = sigmoid_of(gx[j] + gh[j]);
    const T z = sigmoid_of(gx[H + j] + gh[H + j]);
    const T lin = gh[2 * H + j] + b_hn[j];
    const T n = tanh_of(gx[2 * H + j] + r * lin);
    const T h = (T(1) - z) * n + z * hp[j];
    gx[j] = r;
    gx[H + j] = z;
    gx[2 * H + j] = n;
    hn_lin[j] = lin;
    hn[j] = h;
    out[j] = h;
  }
}

template <typename T>
inline void rnn_row(bool relu, int64_t H, T* __restrict g, T* __restrict hn, T* __restrict out) {
  if (relu) {
    for (int64_t j = 0; j < H; ++j) {
      const T h = std::max(g[j], T(0));
      g[j] = h;
      hn[j] = h;
      out[j] = h;
    }
  } else {
    for (int64_t j = 0; j < H; ++j) {
      const T h = tanh_of(g[j]);
      g[j] = h;
      hn[j] = h;
      out[j] = h;
    }
  }
}

// Backward of one active row of one step. dh holds dL/dh_t from later steps on entry and the part
// of dL/dh_{t-1} that does not go through W_hh on exit; dc likewise for the LSTM cell.
template <typename T>
inline void lstm_row_backward(int64_t H, const T* __restrict g, const T* __restrict cp, const T* __restrict cn,
                              const T* __restrict dout, T* __restrict dh, T* __restrict dc, T* __restrict dg) {
  for (int64_t j = 0; j < H; ++j) {
    const T i = g[j], f = g[H + j], c_in = g[2 * H + j], o = g[3 * H + j];
    const T tc = tanh_of(cn[j]);
    const T dht = dh[j] + dout[j];
    const T dct = dc[j] + dht * o * (T(1) - tc * tc);
    dg[j] = dct * c_in * i * (T(1) - i);
    dg[H + j] = dct * cp[j] * f * (T(1) - f);
    dg[2 * H + j] = dct * i * (T(1) - c_in * c_in);
    dg[3 * H + j] = dht * tc * o * (T(1) - o);
    dc[j] = dct * f;
    dh[j] = T(0);
  }
}

template <typename T>
inline void gru_row_backward(int64_t H, const T* __restrict g, const T* __restrict hn_lin, const T* __restrict hp,
                             const T* __restrict dout, T* __restrict dh, T* __restrict dgx, T* __restrict dgh) {
  for (int64_t j = 0; j < H; ++j) {
    const T r = g[j], z = g[H + j], n = g[2 * H + j];
    const T dht = dh[j] + dout[j];
    const T dn = dht * (T(1) - z) * (T(1) - n * n);
    const T dr = dn * hn_lin[j] * r * (T(1) - r);
    const T dz = dht * (hp[j] - n) * z * (T(1) - z);
    dgx[j] = dr;
    dgx[H + j] = dz;
    dgx[2 * H + j] = dn;
    dgh[j] = dr;
    dgh[H + j] = dz;
    dgh[2 * H + j] = dn * r;
    dh[j] = dht * z;
  }
}

template <typename T>
inline void rnn_row_backward(bool relu, int64_t H, const T* __restrict g, const T* __restrict dout, T* __restrict dh,
                             T* __restrict dg) {
  if (relu) {
    for (int64_t j = 0; j < H; ++j) {
      dg[j] = g[j] > T(0) ? dh[j] + dout[j] : T(0);
      dh[j] = T(0);
    }
  } else {
    for (int64_t j = 0; j < H; ++j) {
      dg[j] = (dh[j] + dout[j]) * (T(1) - g[j] * g[j]);
      dh[j] = T(0);
    }
  }
}

// ------------------------------------------------------------------ sequence loops

// Rows per thread chunk for the per-step kernels: a fork/join costs about as much as a few
// thousand gate elements, so small steps stay on one thread.
int64_t row_grain(int64_t row_elems) {
  return std::max<int64_t>(1, 4096 / std::max<int64_t>(row_elems, 1));
}

struct Steps {
  int64_t T;
  bool reverse;
  // Time of the s-th processed step, and the hs/cs slots it reads and writes.
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }
  int64_t prev_slot(int64_t t) const { return reverse ? t + 1 : t; }
  int64_t next_slot(int64_t t) const { return reverse ? t : t + 1; }
  int64_t first_slot() const { return reverse ? T : 0; }
  int64_t last_slot() const { return reverse ? 0 : T; }
};

template <typename T>
void forward_impl(const RnnForwardArgs& a) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, I = cfg.I, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const bool relu = cfg.mode == RnnMode::RnnRelu;
  const Steps steps{Tn, cfg.reverse};
  const bool all_full = cfg.lengths.empty();
  const int64_t* len = cfg.lengths.data();

  const T* x = a.input.data_ptr<T>();
  const T* w_ih = a.w_ih.data_ptr<T>();
  const T* w_hh = a.w_hh.data_ptr<T>();
  T* gates = a.ws.gates.data_ptr<T>();
  T* hs = a.ws.hs.data_ptr<T>();
  T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  T* out = a.output.data_ptr<T>();

  // Biases folded into the input projection; GRU keeps b_hn apart because r multiplies it.
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
  const int64_t rows = Tn * B;
  if (has_bias) {
    parallel_for(0, rows, row_grain(GH), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::memcpy(gates + r * GH, bias.data(), sizeof(T) * GH);
    });
  }
  gemm<T>(false, true, rows, GH, I, x, I, w_ih, I, has_bias ? T(1) : T(0), gates, GH);

  const int64_t BH = B * H;
  T* h_first = hs + steps.first_slot() * BH;
  if (a.h0.defined())
    std::memcpy(h_first, a.h0.data_ptr<T>(), sizeof(T) * BH);
  else
    std::fill(h_first, h_first + BH, T(0));
  if (lstm) {
    T* c_first = cs + steps.first_slot() * BH;
    if (a.c0.defined())
      std::memcpy(c_first, a.c0.data_ptr<T>(), sizeof(T) * BH);
    else
      std::fill(c_first, c_first + BH, T(0));
  }

  std::vector<T> gh(gru ? static_cast<size_t>(B * GH) : 0);
  for (int64_t s = 0; s < Tn; ++s) {
    const int64_t t = steps.time(s);
    const T* hp = hs + steps.prev_slot(t) * BH;
    T* hn = hs + steps.next_slot(t) * BH;
    T* gt = gates + t * B * GH;
    T* ot = out + t * BH;
    if (gru)
      gemm<T>(false, true, B, GH, H, hp, H, w_hh, H, T(0), gh.data(), GH);
    else
      gemm<T>(false, true, B, GH, H, hp, H, w_hh, H, T(1), gt, GH);
    const T* cp = lstm ? cs + steps.prev_slot(t) * BH : nullptr;
    T* cn = lstm ? cs + steps.next_slot(t) * BH : nullptr;
    parallel_for(0, B, row_grain(GH), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o = b * H;
        if (!all_full && t >= len[b]) {  // padding: carry the state, output zeros
          std::memcpy(hn + o, hp + o, sizeof(T) * H);
          if (lstm) std::memcpy(cn + o, cp + o, sizeof(T) * H);
          std::fill(ot + o, ot + o + H, T(0));
          continue;
        }
        switch (cfg.mode) {
          case RnnMode::Lstm:
            lstm_row<T>(H, gt + b * GH, cp + o, cn + o, hn + o, ot + o);
            break;
          case RnnMode::Gru:
            gru_row<T>(H, gt + b * GH, gh.data() + b * GH, b_hn.data(), hp + o, ghn + t * BH + o, hn + o, ot + o);
            break;
          default:
            rnn_row<T>(relu, H, gt + b * GH, hn + o, ot + o);
        }
      }
    });
  }
  std::memcpy(a.h_n.data_ptr<T>(), hs + steps.last_slot() * BH, sizeof(T) * BH);
  if (lstm) std::memcpy(a.c_n.data_ptr<T>(), cs + steps.last_slot() * BH, sizeof(T) * BH);
}

template <typename T>
void backward_impl(const RnnBackwardArgs& a) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, I = cfg.I, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const bool relu = cfg.mode == RnnMode::RnnRelu;
  const Steps steps{Tn, cfg.reverse};
  const bool all_full = cfg.lengths.empty();
  const int64_t* len = cfg.lengths.data();
  const int64_t BH = B * H, rows = Tn * B;

  const T* x = a.input.data_ptr<T>();
  const T* w_ih = a.w_ih.data_ptr<T>();
  const T* w_hh = a.w_hh.data_ptr<T>();
  const T* gates = a.ws.gates.data_ptr<T>();
  const T* hs = a.ws.hs.data_ptr<T>();
  const T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  const T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  const T* dout = a.grad_output.data_ptr<T>();

  // dgx: gradients of the input-side pre-activations; dgh: of the hidden-side ones (they differ
  // only for GRU's n gate, where r multiplies W_hn h + b_hn).
  // Every row is written below, so the buffers start uninitialised.
  const TensorOptions opts{a.input.dtype(), a.input.device()};
  Tensor dgx_buf = empty({rows, GH}, opts), dgh_buf = gru ? empty({rows, GH}, opts) : dgx_buf;
  T* dgx = dgx_buf.data_ptr<T>();
  T* dgh = dgh_buf.data_ptr<T>();
  std::vector<T> dh(a.grad_h_n.data_ptr<T>(), a.grad_h_n.data_ptr<T>() + BH);
  std::vector<T> dc(lstm ? static_cast<size_t>(BH) : 0);
  if (lstm) std::memcpy(dc.data(), a.grad_c_n.data_ptr<T>(), sizeof(T) * BH);
  const bool need_dh0 = a.grad_h0.defined();

  for (int64_t s = Tn - 1; s >= 0; --s) {
    const int64_t t = steps.time(s);
    const int64_t pslot = steps.prev_slot(t), nslot = steps.next_slot(t);
    const T* gt = gates + t * B * GH;
    const T* dot = dout + t * BH;
    T* dgxt = dgx + t * B * GH;
    T* dght = dgh + t * B * GH;
    parallel_for(0, B, row_grain(GH), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o = b * H;
        if (!all_full && t >= len[b]) {  // padding: gradients pass through to the carried state
          std::fill(dgxt + b * GH, dgxt + (b + 1) * GH, T(0));
          if (gru) std::fill(dght + b * GH, dght + (b + 1) * GH, T(0));
          continue;
        }
        switch (cfg.mode) {
          case RnnMode::Lstm:
            lstm_row_backward<T>(H, gt + b * GH, cs + pslot * BH + o, cs + nslot * BH + o, dot + o, dh.data() + o,
                                 dc.data() + o, dgxt + b * GH);
            break;
          case RnnMode::Gru:
            gru_row_backward<T>(H, gt + b * GH, ghn + t * BH + o, hs + pslot * BH + o, dot + o, dh.data() + o,
                                dgxt + b * GH, dght + b * GH);
            break;
          default:
            rnn_row_backward<T>(relu, H, gt + b * GH, dot + o, dh.data() + o, dgxt + b * GH);
        }
      }
    });
    if (s > 0 || need_dh0) gemm<T>(false, false, B, H, GH, dght, GH, w_hh, H, T(1), dh.data(), H);
  }
  if (need_dh0) std::memcpy(a.grad_h0.data_ptr<T>(), dh.data(), sizeof(T) * BH);
  if (a.grad_c0.defined()) std::memcpy(a.grad_c0.data_ptr<T>(), dc.data(), sizeof(T) * BH);

  if (a.grad_input.defined()) gemm<T>(false, false, rows, I, GH, dgx, GH, w_ih, I, T(0), a.grad_input.data_ptr<T>(), I);
  if (a.grad_w_ih.defined()) gemm<T>(true, false, GH, I, rows, dgx, GH, x, I, T(0), a.grad_w_ih.data_ptr<T>(), I);
  if (a.grad_w_hh.defined()) {
    const T* h_prev = hs + (cfg.reverse ? BH : 0);  // the states before each step, in time order
    gemm<T>(true, false, GH, H, rows, dgh, GH, h_prev, H, T(0), a.grad_w_hh.data_ptr<T>(), H);
  }
  if (a.grad_b_ih.defined()) column_sums<T>(rows, GH, dgx, a.grad_b_ih.data_ptr<T>());
  if (a.grad_b_hh.defined()) {
    if (!gru && a.grad_b_ih.defined())
      std::memcpy(a.grad_b_hh.data_ptr<T>(), a.grad_b_ih.data_ptr<T>(), sizeof(T) * GH);
    else
      column_sums<T>(rows, GH, dgh, a.grad_b_hh.data_ptr<T>());
  }
}

void cpu_rnn_forward(const RnnForwardArgs& a) {
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { forward_impl<scalar_t>(a); });
}

void cpu_rnn_backward(const RnnBackwardArgs& a) {
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { backward_impl<scalar_t>(a); });
}

}  // namespace

EMBER_REGISTER_KERNEL(rnn_forward_stub, CPU, cpu_rnn_forward);
EMBER_REGISTER_KERNEL(rnn_backward_stub, CPU, cpu_rnn_backward);

}  // namespace ember
