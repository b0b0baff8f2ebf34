// CPU kernels for the fused recurrent layers (core/rnn_kernels.h). Forward: one GEMM projects the
// input of every step (biases folded in), then per step one GEMM h_{t-1} W_hh^T and a fused gate
// kernel (nonlinearities and state update) threaded over the batch. Backward through time: per
// step a fused gate-gradient kernel and one GEMM for dh_{t-1}; then single GEMMs over all steps
// for d input, dW_ih and dW_hh, and GEMVs for the bias gradients. float32 uses vectorised
// approximations of exp/tanh (about 1e-7 relative error); float64 uses libm so that gradient
// checks see exact math.
#include <cblas.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

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

// ------------------------------------------------------------------ lanes

// float rows run on GCC/Clang vector extensions (8 lanes with AVX, else 4), so the gate math
// vectorises whatever the compiler's cost model and -ftrapping-math would decide for a scalar
// loop; float64 rows run one element at a time on libm, for exact gradient checks.
#if defined(__AVX__)
constexpr int kFloatLanes = 8;
#else
constexpr int kFloatLanes = 4;
#endif
using vfloat = float __attribute__((vector_size(4 * kFloatLanes)));
using vint = int32_t __attribute__((vector_size(4 * kFloatLanes)));

template <typename T>
struct Lanes {  // float64: scalars
  using V = T;
  static constexpr int64_t W = 1;
};
template <>
struct Lanes<float> {
  using V = vfloat;
  static constexpr int64_t W = kFloatLanes;
};

// Loads/stores n <= W elements (the row's tail is zero-padded).
template <typename T>
inline typename Lanes<T>::V ld(const T* p, int64_t n) {
  if constexpr (Lanes<T>::W == 1) {
    (void)n;
    return *p;
  } else {
    typename Lanes<T>::V v{};
    std::memcpy(&v, p, sizeof(T) * static_cast<size_t>(n));
    return v;
  }
}
template <typename T>
inline void st(T* p, typename Lanes<T>::V v, int64_t n) {
  if constexpr (Lanes<T>::W == 1) {
    (void)n;
    *p = v;
  } else {
    std::memcpy(p, &v, sizeof(T) * static_cast<size_t>(n));
  }
}

// Calls f(j, n) for lane groups [j, j + n) covering [0, H); full groups pass n as the constant W
// so that their loads and stores are single moves.
template <typename T, typename F>
inline void for_lanes(int64_t H, const F& f) {
  constexpr int64_t W = Lanes<T>::W;
  int64_t j = 0;
  for (; j + W <= H; j += W) f(j, W);
  if (j < H) f(j, H - j);
}

inline vfloat splat(float x) {
  return vfloat{} + x;
}
inline vfloat select(vint mask, vfloat a, vfloat b) {
  return std::bit_cast<vfloat>((mask & std::bit_cast<vint>(a)) | (~mask & std::bit_cast<vint>(b)));
}

// exp(x) = 2^n e^r with |r| <= ln2/2: a degree-6 polynomial for e^r (Cephes expf, about 1e-7
// relative error) and 2^n built in the exponent bits. Inputs are clamped to where the result is a
// normal float.
inline vfloat exp_of(vfloat x) {
  x = select(x < -87.0f, splat(-87.0f), x);
  x = select(x > 88.0f, splat(88.0f), x);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const vfloat t = x * 1.44269504088896341f + kMagic;
  const vfloat n = t - kMagic;
  const vint ni = std::bit_cast<vint>(t) - std::bit_cast<int32_t>(kMagic);
  const vfloat r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  vfloat p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<vfloat>((ni + 127) << 23);
}

inline vfloat sigmoid_of(vfloat x) {
  return 1.0f / (1.0f + exp_of(-x));
}
inline double sigmoid_of(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Cephes tanhf: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), else through exp.
inline vfloat tanh_of(vfloat x) {
  const vint sign = std::bit_cast<vint>(x) & std::bit_cast<int32_t>(-0.0f);
  const vfloat ax = std::bit_cast<vfloat>(std::bit_cast<vint>(x) ^ sign);
  const vfloat z = x * x;
  vfloat p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const vfloat small = p * z * x + x;
  const vfloat big = 1.0f - 2.0f / (exp_of(2.0f * ax) + 1.0f);
  return select(ax < 0.625f, small, std::bit_cast<vfloat>(std::bit_cast<vint>(big) | sign));
}
inline double tanh_of(double x) {
  return std::tanh(x);
}

inline vfloat relu_of(vfloat x) {
  return select(x > 0.0f, x, splat(0.0f));
}
inline double relu_of(double x) {
  return x > 0.0 ? x : 0.0;
}
// g where h > 0, else 0 (ReLU's backward, as PyTorch: the derivative at 0 is 0).
inline vfloat where_positive(vfloat h, vfloat g) {
  return select(h > 0.0f, g, splat(0.0f));
}
inline double where_positive(double h, double g) {
  return h > 0.0 ? g : 0.0;
}

// ------------------------------------------------------------------ per-row cells

// One batch row of one step, for `units` hidden units (the calling thread's share); H is the
// distance between gates in a row. `g` holds the pre-activations on entry, the activations on exit.
template <typename T>
inline void lstm_row(int64_t H, int64_t units, T* __restrict g, const T* __restrict cp, T* __restrict cn,
                     T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto i = sigmoid_of(ld(g + j, n)), f = sigmoid_of(ld(g + H + j, n));
    const auto c_in = tanh_of(ld(g + 2 * H + j, n)), o = sigmoid_of(ld(g + 3 * H + j, n));
    const auto c = f * ld(cp + j, n) + i * c_in;
    const auto h = o * tanh_of(c);
    st(g + j, i, n);
    st(g + H + j, f, n);
    st(g + 2 * H + j, c_in, n);
    st(g + 3 * H + j, o, n);
    st(cn + j, c, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

// `gx` holds W_i x + b_i (+ b_hr, b_hz for r and z) on entry and r, z, n on exit; `gh` holds
// W_hh h_{t-1} without bias.
template <typename T>
inline void gru_row(int64_t H, int64_t units, T* __restrict gx, const T* __restrict gh, const T* __restrict b_hn,
                    const T* __restrict hp, T* __restrict hn_lin, T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto r = sigmoid_of(ld(gx + j, n) + ld(gh + j, n));
    const auto z = sigmoid_of(ld(gx + H + j, n) + ld(gh + H + j, n));
    const auto lin = ld(gh + 2 * H + j, n) + ld(b_hn + j, n);
    const auto nn = tanh_of(ld(gx + 2 * H + j, n) + r * lin);
    const auto h = (T(1) - z) * nn + z * ld(hp + j, n);
    st(gx + j, r, n);
    st(gx + H + j, z, n);
    st(gx + 2 * H + j, nn, n);
    st(hn_lin + j, lin, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

template <typename T>
inline void rnn_row(bool relu, int64_t units, T* __restrict g, T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto pre = ld(g + j, n);
    const auto h = relu ? relu_of(pre) : tanh_of(pre);
    st(g + j, h, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

// Backward of one active row of one step. dh holds dL/dh_t from later steps on entry and the part
// of dL/dh_{t-1} that does not go through W_hh on exit; dc likewise for the LSTM cell.
template <typename T>
inline void lstm_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict cp,
                              const T* __restrict cn, const T* __restrict dout, T* __restrict dh, T* __restrict dc,
                              T* __restrict dg) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto i = ld(g + j, n), f = ld(g + H + j, n), c_in = ld(g + 2 * H + j, n), o = ld(g + 3 * H + j, n);
    const auto tc = tanh_of(ld(cn + j, n));
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    const auto dct = ld(dc + j, n) + dht * o * (T(1) - tc * tc);
    st(dg + j, dct * c_in * i * (T(1) - i), n);
    st(dg + H + j, dct * ld(cp + j, n) * f * (T(1) - f), n);
    st(dg + 2 * H + j, dct * i * (T(1) - c_in * c_in), n);
    st(dg + 3 * H + j, dht * tc * o * (T(1) - o), n);
    st(dc + j, dct * f, n);
    st(dh + j, typename Lanes<T>::V{}, n);
  });
}

template <typename T>
inline void gru_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict hn_lin,
                             const T* __restrict hp, const T* __restrict dout, T* __restrict dh, T* __restrict dgx,
                             T* __restrict dgh) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto r = ld(g + j, n), z = ld(g + H + j, n), nn = ld(g + 2 * H + j, n);
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    const auto dn = dht * (T(1) - z) * (T(1) - nn * nn);
    const auto dr = dn * ld(hn_lin + j, n) * r * (T(1) - r);
    const auto dz = dht * (ld(hp + j, n) - nn) * z * (T(1) - z);
    st(dgx + j, dr, n);
    st(dgx + H + j, dz, n);
    st(dgx + 2 * H + j, dn, n);
    st(dgh + j, dr, n);
    st(dgh + H + j, dz, n);
    st(dgh + 2 * H + j, dn * r, n);
    st(dh + j, dht * z, n);
  });
}

template <typename T>
inline void rnn_row_backward(bool relu, int64_t units, const T* __restrict g, const T* __restrict dout,
                             T* __restrict dh, T* __restrict dg) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto h = ld(g + j, n);
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    st(dg + j, relu ? where_positive(h, dht) : dht * (T(1) - h * h), n);
    st(dh + j, typename Lanes<T>::V{}, n);
  });
}

// ------------------------------------------------------------------ threads

bool in_parallel() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

// Runs f(tid, nthreads) on nthreads OpenMP threads (inline when 1).
template <typename F>
void run_threads(int nthreads, const F& f) {
  if (nthreads <= 1) {
    f(0, 1);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(nthreads)
  f(omp_get_thread_num(), omp_get_num_threads());
#else
  f(0, 1);
#endif
}

inline void barrier(int nthreads) {
#ifdef _OPENMP
  if (nthreads > 1) {
#pragma omp barrier
  }
#else
  (void)nthreads;
#endif
}

// ------------------------------------------------------------------ recurrent GEMM

// The per-step products h_{t-1} W_hh^T (forward) and dG_t W_hh (backward) are small in the batch
// dimension, and a BLAS call would repack all of W_hh at every step. Instead each thread packs its
// share of W_hh once per call into panels of kPanel columns (zero-padded, K rows of kPanel
// contiguous values) and runs a register-blocked kernel over them at every step.
constexpr int64_t kPanel = 16;
constexpr int64_t kBlockK = 256;  // a panel's K-block (16 KB of floats) stays in L1 across row blocks
constexpr int kMaxRows = 6;       // rows per register block: 12 accumulators of 8 floats

// C[0:MR, 0:width] (+)= A[0:MR, 0:kc] P[0:kc, 0:kPanel]; the portable version.
template <int MR, typename T>
inline void micro_kernel(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width,
                         bool accumulate) {
  T acc[MR][kPanel];
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < kPanel; ++j) acc[i][j] = accumulate && j < width ? c[i * ldc + j] : T(0);
  for (int64_t k = 0; k < kc; ++k) {
    const T* pk = p + k * kPanel;
    for (int i = 0; i < MR; ++i) {
      const T av = a[i * lda + k];
      for (int64_t j = 0; j < kPanel; ++j) acc[i][j] += av * pk[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = acc[i][j];
}

#if defined(__AVX2__) && defined(__FMA__)
// float with AVX2/FMA: two 8-float accumulators per row, the A value broadcast from memory. The
// accumulators are named variables (not arrays) so that they live in registers.
#define EMBER_RNN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int MR>
inline void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* p, float* c, int64_t ldc,
                              int64_t width, bool accumulate) {
  static_assert(MR >= 1 && MR <= kMaxRows);
  alignas(32) float tile[kMaxRows][kPanel];
  const bool full = width == kPanel;
  if (accumulate && !full)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < kPanel; ++j) tile[i][j] = j < width ? c[i * ldc + j] : 0.0f;
#define EMBER_RNN_DECL(i) __m256 lo##i = _mm256_setzero_ps(), hi##i = _mm256_setzero_ps();
  EMBER_RNN_ROWS(EMBER_RNN_DECL)
#undef EMBER_RNN_DECL
  if (accumulate) {
#define EMBER_RNN_LOAD(i)                            \
  if constexpr (MR > i) {                            \
    const float* src = full ? c + i * ldc : tile[i]; \
    lo##i = _mm256_loadu_ps(src);                    \
    hi##i = _mm256_loadu_ps(src + 8);                \
  }
    EMBER_RNN_ROWS(EMBER_RNN_LOAD)
#undef EMBER_RNN_LOAD
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(p + k * kPanel), b1 = _mm256_load_ps(p + k * kPanel + 8);
#define EMBER_RNN_FMA(i)                                    \
  if constexpr (MR > i) {                                   \
    const __m256 av = _mm256_broadcast_ss(a + i * lda + k); \
    lo##i = _mm256_fmadd_ps(av, b0, lo##i);                 \
    hi##i = _mm256_fmadd_ps(av, b1, hi##i);                 \
  }
    EMBER_RNN_ROWS(EMBER_RNN_FMA)
#undef EMBER_RNN_FMA
  }
#define EMBER_RNN_STORE(i)                     \
  if constexpr (MR > i) {                      \
    float* dst = full ? c + i * ldc : tile[i]; \
    _mm256_storeu_ps(dst, lo##i);              \
    _mm256_storeu_ps(dst + 8, hi##i);          \
  }
  EMBER_RNN_ROWS(EMBER_RNN_STORE)
#undef EMBER_RNN_STORE
  if (!full)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = tile[i][j];
}
#undef EMBER_RNN_ROWS
#endif

template <int MR, typename T>
inline void micro(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width, bool accumulate) {
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    micro_kernel_avx2<MR>(kc, a, lda, p, c, ldc, width, accumulate);
    return;
  }
#endif
  micro_kernel<MR, T>(kc, a, lda, p, c, ldc, width, accumulate);
}

// C[M, 0:width] (+)= A[M, K] P for one packed panel P [K, kPanel] (64-byte aligned).
template <typename T>
void gemm_panel(int64_t M, int64_t K, const T* a, int64_t lda, const T* panel, T* c, int64_t ldc, int64_t width,
                bool accumulate) {
  const int64_t blocks = (M + kMaxRows - 1) / kMaxRows;
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, K - k0);
    const bool acc = accumulate || k0 > 0;
    int64_t row = 0;
    for (int64_t bi = 0; bi < blocks; ++bi) {
      // rows spread evenly over the blocks, so that no block is left nearly empty
      const int64_t mr = (M - row + (blocks - bi) - 1) / (blocks - bi);
      const T* ab = a + row * lda + k0;
      const T* pb = panel + k0 * kPanel;
      T* cb = c + row * ldc;
      switch (mr) {
        case 1:
          micro<1>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 2:
          micro<2>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 3:
          micro<3>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 4:
          micro<4>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 5:
          micro<5>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        default:
          micro<6>(kc, ab, lda, pb, cb, ldc, width, acc);
      }
      row += mr;
    }
  }
}

// Packs panel columns [u0, u0 + width) of the K x N operand elem(k, u) into p (zero-padded).
template <typename T, typename Elem>
void pack_panel(int64_t K, int64_t u0, int64_t width, T* p, const Elem& elem) {
  for (int64_t k = 0; k < K; ++k) {
    T* row = p + k * kPanel;
    for (int64_t j = 0; j < kPanel; ++j) row[j] = j < width ? elem(k, u0 + j) : T(0);
  }
}

// ------------------------------------------------------------------ sequence loops

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

// Each thread owns a contiguous range of hidden-unit panels for the whole sequence: it computes
// the GEMM columns of those units (in every gate) and then their gate math, so a step needs one
// barrier (everyone's h_t before anyone's next GEMM), and the loop runs in one parallel region.
struct UnitSplit {
  int64_t q0, q1, u0, u1;  // panels [q0, q1) = units [u0, u1)
};
UnitSplit split_units(int64_t H, int tid, int nthreads) {
  const int64_t panels = (H + kPanel - 1) / kPanel;
  UnitSplit s;
  s.q0 = panels * tid / nthreads;
  s.q1 = panels * (tid + 1) / nthreads;
  s.u0 = std::min(H, s.q0 * kPanel);
  s.u1 = std::min(H, s.q1 * kPanel);
  return s;
}

// Threads for the recurrent loop: one per panel at most, and one when a step is too small for a
// barrier to pay off.
int recurrent_threads(int64_t B, int64_t H, int64_t G) {
  const int64_t panels = (H + kPanel - 1) / kPanel;
  if (B * G * H * H < 262144 || in_parallel()) return 1;
  return static_cast<int>(std::min<int64_t>(get_num_threads(), panels));
}

template <typename T>
void forward_impl(const RnnForwardArgs& a) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, I = cfg.I, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const bool relu = cfg.mode == RnnMode::RnnRelu;
  const Steps steps{Tn, cfg.reverse};
  const bool all_full = cfg.lengths.empty();
  const int64_t* len = cfg.lengths.data();
  const TensorOptions opts{a.input.dtype(), a.input.device()};

  const T* x = a.input.data_ptr<T>();
  const T* w_ih = a.w_ih.data_ptr<T>();
  const T* w_hh = a.w_hh.data_ptr<T>();
  T* gates = a.ws.gates.data_ptr<T>();
  T* hs = a.ws.hs.data_ptr<T>();
  T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  T* out = a.output.data_ptr<T>();

  // The input projection of every step in one GEMM, biases folded in (GRU keeps b_hn apart
  // because r multiplies it).
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
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / GH), [&](int64_t r0, int64_t r1) {
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

  // Packed W_hh^T: panel (g, q) holds gate g's units [16q, 16q + 16) as columns, K = H rows.
  const int64_t QP = (H + kPanel - 1) / kPanel;
  Tensor packed = empty({G * QP * H * kPanel}, opts);
  T* pk = packed.data_ptr<T>();
  Tensor gh_buf = gru ? empty({B, GH}, opts) : Tensor();
  T* gh = gru ? gh_buf.data_ptr<T>() : nullptr;

  run_threads(recurrent_threads(B, H, G), [&](int tid, int nthreads) {
    const UnitSplit us = split_units(H, tid, nthreads);
    const int64_t nu = us.u1 - us.u0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t q = us.q0; q < us.q1; ++q)
        pack_panel<T>(H, q * kPanel, std::min(kPanel, H - q * kPanel), pk + (g * QP + q) * H * kPanel,
                      [&](int64_t k, int64_t u) { return w_hh[(g * H + u) * H + k]; });
    for (int64_t s = 0; s < Tn; ++s) {
      const int64_t t = steps.time(s);
      const T* hp = hs + steps.prev_slot(t) * BH;
      T* hn = hs + steps.next_slot(t) * BH;
      T* gt = gates + t * B * GH;
      T* ot = out + t * BH;
      const T* cp = lstm ? cs + steps.prev_slot(t) * BH : nullptr;
      T* cn = lstm ? cs + steps.next_slot(t) * BH : nullptr;
      for (int64_t g = 0; g < G; ++g)
        for (int64_t q = us.q0; q < us.q1; ++q) {
          const int64_t col = g * H + q * kPanel;
          gemm_panel<T>(B, H, hp, H, pk + (g * QP + q) * H * kPanel, (gru ? gh : gt) + col, GH,
                        std::min(kPanel, H - q * kPanel), !gru);
        }
      for (int64_t b = 0; b < B && nu > 0; ++b) {
        const int64_t o = b * H + us.u0;
        if (!all_full && t >= len[b]) {  // padding: carry the state, output zeros
          std::memcpy(hn + o, hp + o, sizeof(T) * nu);
          if (lstm) std::memcpy(cn + o, cp + o, sizeof(T) * nu);
          std::fill(ot + o, ot + o + nu, T(0));
          continue;
        }
        T* gb = gt + b * GH + us.u0;
        switch (cfg.mode) {
          case RnnMode::Lstm:
            lstm_row<T>(H, nu, gb, cp + o, cn + o, hn + o, ot + o);
            break;
          case RnnMode::Gru:
            gru_row<T>(H, nu, gb, gh + b * GH + us.u0, b_hn.data() + us.u0, hp + o, ghn + t * BH + o, hn + o, ot + o);
            break;
          default:
            rnn_row<T>(relu, nu, gb, hn + o, ot + o);
        }
      }
      barrier(nthreads);
    }
  });
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
  const TensorOptions opts{a.input.dtype(), a.input.device()};

  const T* x = a.input.data_ptr<T>();
  const T* w_ih = a.w_ih.data_ptr<T>();
  const T* w_hh = a.w_hh.data_ptr<T>();
  const T* gates = a.ws.gates.data_ptr<T>();
  const T* hs = a.ws.hs.data_ptr<T>();
  const T* cs = lstm ? a.ws.cs.data_ptr<T>() : nullptr;
  const T* ghn = gru ? a.ws.ghn.data_ptr<T>() : nullptr;
  const T* dout = a.grad_output.data_ptr<T>();

  // dgx: gradients of the input-side pre-activations; dgh: of the hidden-side ones (they differ
  // only for GRU's n gate, where r multiplies W_hn h + b_hn). Every row is written below.
  Tensor dgx_buf = empty({rows, GH}, opts), dgh_buf = gru ? empty({rows, GH}, opts) : dgx_buf;
  T* dgx = dgx_buf.data_ptr<T>();
  T* dgh = dgh_buf.data_ptr<T>();
  std::vector<T> dh(a.grad_h_n.data_ptr<T>(), a.grad_h_n.data_ptr<T>() + BH);
  std::vector<T> dc(lstm ? static_cast<size_t>(BH) : 0);
  if (lstm) std::memcpy(dc.data(), a.grad_c_n.data_ptr<T>(), sizeof(T) * BH);
  const bool need_dh0 = a.grad_h0.defined();

  // Packed W_hh: panel q holds units [16q, 16q + 16) as columns, K = G*H rows.
  const int64_t QP = (H + kPanel - 1) / kPanel;
  Tensor packed = empty({QP * GH * kPanel}, opts);
  T* pk = packed.data_ptr<T>();

  run_threads(recurrent_threads(B, H, G), [&](int tid, int nthreads) {
    const UnitSplit us = split_units(H, tid, nthreads);
    const int64_t nu = us.u1 - us.u0;
    for (int64_t q = us.q0; q < us.q1; ++q)
      pack_panel<T>(GH, q * kPanel, std::min(kPanel, H - q * kPanel), pk + q * GH * kPanel,
                    [&](int64_t k, int64_t u) { return w_hh[k * H + u]; });
    for (int64_t s = Tn - 1; s >= 0; --s) {
      const int64_t t = steps.time(s);
      const int64_t pslot = steps.prev_slot(t), nslot = steps.next_slot(t);
      const T* gt = gates + t * B * GH;
      const T* dot = dout + t * BH;
      T* dgxt = dgx + t * B * GH;
      T* dght = dgh + t * B * GH;
      for (int64_t b = 0; b < B && nu > 0; ++b) {
        const int64_t o = b * H + us.u0, go = b * GH + us.u0;
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
            gru_row_backward<T>(H, nu, gt + go, ghn + t * BH + o, hs + pslot * BH + o, dot + o, dh.data() + o,
                                dgxt + go, dght + go);
            break;
          default:
            rnn_row_backward<T>(relu, nu, gt + go, dot + o, dh.data() + o, dgxt + go);
        }
      }
      barrier(nthreads);  // every unit's dG_t before anyone's dh GEMM
      if (s > 0 || need_dh0)
        for (int64_t q = us.q0; q < us.q1; ++q)
          gemm_panel<T>(B, GH, dght, GH, pk + q * GH * kPanel, dh.data() + q * kPanel, H,
                        std::min(kPanel, H - q * kPanel), true);
    }
  });
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
