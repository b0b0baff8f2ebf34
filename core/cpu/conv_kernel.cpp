// CPU convolution: im2col + OpenBLAS GEMM for the forward pass and both backward passes.
//
// Images are processed in chunks. A chunk's im2col matrix [C/groups * KH * KW, nb * OH * OW] holds
// several images side by side when the images are small, so that the GEMM has enough columns to
// run near peak (a 5x5 input has 9 output pixels: one image alone makes a useless GEMM). Chunks
// run in parallel on OpenMP threads, each calling single-threaded OpenBLAS (the OpenMP build runs
// serially inside a parallel region); with fewer chunks than threads, chunks run one after another
// and OpenBLAS threads each GEMM instead. A 1x1, stride-1, unpadded convolution is a plain GEMM on
// the input, without im2col. Depthwise convolutions (one input and one output channel per group)
// would make GEMMs of one row, so they run as direct loops. 3x3 and 5x5 stride-1 convolutions of
// small images run as Winograd F(2x2, 3x3) and F(2x2, 5x5), GEMMs over transformed tiles (conv_winograd.h).
// At the avx2 and avx512 levels the small images' forward and input-gradient GEMMs run on the packed-panel
// kernel (core/cpu/panel_gemm.h) instead of OpenBLAS: see panel_gemms below.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/conv_winograd.h"
#include "core/cpu/lowp_reference.h"
#include "core/cpu/panel_gemm.h"
#include "core/nn_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C.
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// The GEMMs of a layer: bfloat16 when its tensors were (ConvGeometry::bf16_gemms), else the dtype's.
inline void gemm(const ConvGeometry& g, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (g.bf16_gemms)
    cpu::sgemm_as_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(const ConvGeometry&, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Per-thread scratch that grows and is kept: the same shapes come back every training step, and
// re-faulting megabytes of fresh pages each call would cost as much as the im2col itself.
template <typename T>
T* scratch(int slot, int64_t n) {
  thread_local std::vector<unsigned char> bufs[3];
  auto& b = bufs[slot];
  const size_t bytes = static_cast<size_t>(n) * sizeof(T) + 64;
  if (b.size() < bytes) {
    b.clear();
    b.shrink_to_fit();
    b.resize(bytes);
  }
  auto p = reinterpret_cast<uintptr_t>(b.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t{63});
}

// Output columns [lo, hi) read input columns inside [0, W) for a kernel column starting at iw0.
inline void valid_range(int64_t iw0, int64_t stride, int64_t W, int64_t OW, int64_t& lo, int64_t& hi) {
  // ow * stride + iw0 >= 0  and  ow * stride + iw0 < W
  lo = iw0 >= 0 ? 0 : (-iw0 + stride - 1) / stride;
  hi = W - iw0 <= 0 ? 0 : (W - iw0 + stride - 1) / stride;
  lo = std::min(lo, OW);
  hi = std::clamp(hi, lo, OW);
}

// img [Cg, H, W] -> col rows (c, kh, kw), each holding output rows [oh0, oh1) (OW entries per
// output row), row stride ld.
template <typename T>
void im2col(const T* img, T* col, int64_t ld, int64_t Cg, const ConvGeometry& g, int64_t oh0, int64_t oh1) {
  const int64_t H = g.H, W = g.W, OW = g.OW;
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* dst = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const int64_t iw0 = kw * g.dw - g.pw;
        int64_t lo, hi;
        valid_range(iw0, g.sw, W, OW, lo, hi);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* d = dst + (oh - oh0) * OW;
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= H) {
            std::fill(d, d + OW, T(0));
            continue;
          }
          const T* src = img + (c * H + ih) * W + iw0;
          for (int64_t ow = 0; ow < lo; ++ow) d[ow] = T(0);
          if (g.sw == 1) {
            std::memcpy(d + lo, src + lo, static_cast<size_t>(hi - lo) * sizeof(T));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) d[ow] = src[ow * g.sw];
          }
          for (int64_t ow = hi; ow < OW; ++ow) d[ow] = T(0);
        }
      }
}

// The adjoint of im2col: img [Cg, H, W] += col (img must be zeroed first by the caller).
template <typename T>
void col2im(const T* col, int64_t ld, T* img, int64_t Cg, const ConvGeometry& g, int64_t oh0, int64_t oh1) {
  const int64_t H = g.H, W = g.W, OW = g.OW;
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* src = col + ((c * g.KH + kh) * g.KW + kw) * ld;
        const int64_t iw0 = kw * g.dw - g.pw;
        int64_t lo, hi;
        valid_range(iw0, g.sw, W, OW, lo, hi);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
          if (ih < 0 || ih >= H) continue;
          const T* s = src + (oh - oh0) * OW;
          T* d = img + (c * H + ih) * W + iw0;
          if (g.sw == 1) {
#pragma omp simd
            for (int64_t ow = lo; ow < hi; ++ow) d[ow] += s[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) d[ow * g.sw] += s[ow];
          }
        }
      }
}

// How the batch is cut into chunks and whether chunks run on parallel threads.
struct Plan {
  int64_t per_chunk = 1;  // images per chunk
  int64_t chunks = 0;
  int threads = 1;  // > 1: chunks in parallel (serial OpenBLAS inside)
};

// Chunks of at most `b` images, on every thread when the work is worth a parallel region.
Plan make_plan_of(const ConvGeometry& g, int64_t b) {
  Plan p;
  // Below a few million multiply-adds a parallel region costs more than it saves (and on a busy
  // machine a descheduled thread makes every barrier a scheduler time slice).
  constexpr int64_t kMinParallelMacs = int64_t{1} << 22;
  const int64_t ohw = std::max<int64_t>(1, g.OH * g.OW);
  const int64_t macs = g.N * g.OC * ohw * (g.C / std::max<int64_t>(1, g.groups)) * g.KH * g.KW;
#ifdef _OPENMP
  const bool nested = omp_in_parallel();
#else
  const bool nested = true;
#endif
  const int nt = nested || macs < kMinParallelMacs ? 1 : get_num_threads();
  if (nt > 1) {
    // As many chunks on every thread: chunks run statically, and seven chunks of ten images on
    // two threads (the DCGAN discriminator's 7x7 layer) kept one thread idle for a quarter of
    // each of its convolutions. Each thread's share is cut into equal chunks of at most b.
    const int64_t share = (g.N + nt - 1) / nt, per_thread = (share + b - 1) / b;
    b = std::max<int64_t>(1, (g.N + nt * per_thread - 1) / (nt * per_thread));
  }
  b = std::clamp<int64_t>(b, 1, std::max<int64_t>(1, g.N));
  p.per_chunk = b;
  p.chunks = (g.N + b - 1) / b;
  p.threads = static_cast<int>(std::min<int64_t>(nt, p.chunks));
  return p;
}

// Enough GEMM columns per chunk to keep OpenBLAS efficient, without a chunk's im2col matrix
// outgrowing the caches or leaving threads idle.
Plan make_plan(const ConvGeometry& g, bool batch_images) {
  constexpr int64_t kTargetColumns = 512;
  const int64_t ohw = std::max<int64_t>(1, g.OH * g.OW);
  return make_plan_of(g, batch_images ? std::max<int64_t>(1, kTargetColumns / ohw) : 1);
}

// f(thread, first image, images) for every chunk.
template <typename F>
void run_chunks(const Plan& p, int64_t N, const F& f) {
  if (p.threads > 1) {
#pragma omp parallel num_threads(p.threads)
    {
#ifdef _OPENMP
      const int tid = omp_get_thread_num();
#else
      const int tid = 0;
#endif
#pragma omp for schedule(static)
      for (int64_t c = 0; c < p.chunks; ++c) f(tid, c * p.per_chunk, std::min(p.per_chunk, N - c * p.per_chunk));
    }
  } else {
    for (int64_t c = 0; c < p.chunks; ++c) f(0, c * p.per_chunk, std::min(p.per_chunk, N - c * p.per_chunk));
  }
}

bool is_pointwise(const ConvGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.OH == g.H && g.OW == g.W;
}

bool is_depthwise(const ConvGeometry& g) {
  return g.groups > 1 && g.groups == g.C && g.groups == g.OC;
}

// Output rows per im2col tile for a single large image: the tile's column matrix stays around
// 512 KiB (in L2/L3 while the GEMM packs it, instead of a round trip through memory), with enough
// columns for an efficient GEMM. (At the ResNet 64-channel 56x56 layer, untiled im2col ran about
// 15-25% slower; 256 KiB to 1 MiB tiles were within this machine's noise of each other.)
template <typename T>
int64_t tile_rows(const ConvGeometry& g, int64_t K) {
  constexpr int64_t kTileBytes = int64_t{1} << 19, kMinColumns = 256;
  const int64_t cols = std::max(kMinColumns, kTileBytes / std::max<int64_t>(1, K * static_cast<int64_t>(sizeof(T))));
  return std::clamp<int64_t>(cols / std::max<int64_t>(1, g.OW), 1, std::max<int64_t>(1, g.OH));
}

// ------------------------------------------------------------------ depthwise (direct loops)

// Output plane oc of image n from input plane oc: out[oh, ow] = sum_k w[k] * in[...].
template <typename T>
void depthwise_plane_forward(T* o, const T* in, const T* w, T bias, const ConvGeometry& g) {
  std::fill(o, o + g.OH * g.OW, bias);
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const T wv = w[kh * g.KW + kw];
      const int64_t iw0 = kw * g.dw - g.pw;
      int64_t lo, hi;
      valid_range(iw0, g.sw, g.W, g.OW, lo, hi);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        const T* s = in + ih * g.W + iw0;
        T* d = o + oh * g.OW;
        if (g.sw == 1) {
#pragma omp simd
          for (int64_t ow = lo; ow < hi; ++ow) d[ow] += wv * s[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) d[ow] += wv * s[ow * g.sw];
        }
      }
    }
}

// The input gradient of image n's plane c (d, of H x W) from its output gradient s: col2im of the
// filter w (outer) grad_out, plus the bias the backward adds.
template <typename T>
void depthwise_plane_backward_input(T* d, const T* s, const T* w, T bias, const ConvGeometry& g) {
  std::fill(d, d + g.H * g.W, bias);
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const T wv = w[kh * g.KW + kw];
      const int64_t iw0 = kw * g.dw - g.pw;
      int64_t lo, hi;
      valid_range(iw0, g.sw, g.W, g.OW, lo, hi);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        const T* sr = s + oh * g.OW;
        T* dr = d + ih * g.W + iw0;
        if (g.sw == 1) {
#pragma omp simd
          for (int64_t ow = lo; ow < hi; ++ow) dr[ow] += wv * sr[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) dr[ow * g.sw] += wv * sr[ow];
        }
      }
    }
}

// The input gradient of a depthwise convolution, plane by plane (bias included).
template <typename T>
void depthwise_backward_input(T* gi, const T* go, const T* w, const T* bp, const ConvGeometry& g) {
  const int64_t K = g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.N * g.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, OHW * K)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) {
                   const int64_t c = p % g.C;
                   depthwise_plane_backward_input(gi + p * HW, go + p * OHW, w + c * K, bp ? bp[c] : T(0), g);
                 }
               });
}

// The weight gradient of a depthwise convolution, a thread per channel:
// gw[c, k] = sum_n sum_o grad_out[n, c, o] * in[n, c, pos(o, k)].
template <typename T>
void depthwise_backward_weight(T* gw, const T* go, const T* in, const ConvGeometry& g) {
  const int64_t K = g.KH * g.KW, HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.C, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t iw0 = kw * g.dw - g.pw;
          int64_t lo, hi;
          valid_range(iw0, g.sw, g.W, g.OW, lo, hi);
          T acc = 0;
          for (int64_t n = 0; n < g.N; ++n) {
            const T* s = go + (n * g.C + c) * OHW;
            const T* x = in + (n * g.C + c) * HW;
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              const int64_t ih = oh * g.sh - g.ph + kh * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              const T* sr = s + oh * g.OW;
              const T* xr = x + ih * g.W + iw0;
              if (g.sw == 1) {
#pragma omp simd reduction(+ : acc)
                for (int64_t ow = lo; ow < hi; ++ow) acc += sr[ow] * xr[ow];
              } else {
                for (int64_t ow = lo; ow < hi; ++ow) acc += sr[ow] * xr[ow * g.sw];
              }
            }
          }
          gw[c * K + kh * g.KW + kw] = acc;
        }
  });
}

// ------------------------------------------------------------------ channels-last path
// For small images (short output rows) im2col is a storm of copies a few elements long. Instead
// the chunk's images are transposed to channels-last [nb, H, W, C], each output pixel's patch is
// KH*KW contiguous copies of C channels ("im2row", rows = output pixels, columns (kh, kw, c)).
// The forward GEMM produces [pixels, OC], transposed back to NCHW. The backward GEMMs read the
// output gradient as [OC, pixels] (transposed by OpenBLAS's packing), the images' channel rows side
// by side: contiguous copies instead of a transpose. Producing the forward's output as [OC, pixels]
// the same way was measured too and cost the DCGAN and MnistCnn 2-3%. groups == 1 only.

bool use_channels_last(const ConvGeometry& g) {
  return g.groups == 1 && g.C >= 8 && g.OW < 16;
}

// x [C, HW] -> xt [HW, C]. Four channels at a time: four contiguous loads and one 16-byte run of
// stores per pixel. One channel at a time stored a lone float every C * 4 bytes, and that loop ran
// MNIST's c3 (5x5 images, 64 channels) 5% slower at the avx512 level on Zen 4 than at avx2.
template <typename T>
void to_channels_last(const T* x, T* xt, int64_t C, int64_t HW) {
  int64_t c = 0;
  for (; c + 4 <= C; c += 4) {
    const T *s0 = x + c * HW, *s1 = s0 + HW, *s2 = s1 + HW, *s3 = s2 + HW;
    for (int64_t i = 0; i < HW; ++i) {
      T* d = xt + i * C + c;
      d[0] = s0[i], d[1] = s1[i], d[2] = s2[i], d[3] = s3[i];
    }
  }
  for (; c < C; ++c) {
    const T* s = x + c * HW;
    for (int64_t i = 0; i < HW; ++i) xt[i * C + c] = s[i];
  }
}

// xt [HW, C] -> x [C, HW] (+ b[c] when given)
template <typename T>
void from_channels_last(const T* xt, T* x, int64_t C, int64_t HW, const T* b) {
  for (int64_t c = 0; c < C; ++c) {
    T* d = x + c * HW;
    const T bv = b ? b[c] : T(0);
    for (int64_t i = 0; i < HW; ++i) d[i] = xt[i * C + c] + bv;
  }
}

// Images x[j] [C, HW] (j < nb, consecutive) -> xc [C, nb * HW], each channel's rows side by side:
// the layout a GEMM over the batch's pixels reads as a [C, pixels] matrix. Contiguous runs of HW,
// where a transpose to channels-last stores one element every C.
template <typename T>
void images_side_by_side(const T* x, T* xc, int64_t C, int64_t HW, int64_t nb) {
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t c = 0; c < C; ++c)
      std::memcpy(xc + c * nb * HW + j * HW, x + (j * C + c) * HW, static_cast<size_t>(HW) * sizeof(T));
}

// Calls f(row, tap, pixel, n) over every output pixel (row) of one image and kernel row: n
// consecutive taps from `tap` read n consecutive input pixels from `pixel` (-1: the n taps lie in
// the padding). With dilation 1 along the width a kernel row is at most three runs (padding,
// inside, padding), so patch rows move KW * C elements at a time rather than one tap's C: a
// libc memcpy call per tap was 3% of a MnistCnn step.
template <typename F>
void for_each_run(const ConvGeometry& g, const F& f) {
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t r = oh * g.OW + ow, iw0 = ow * g.sw - g.pw;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * g.sh - g.ph + kh * g.dh, t0 = kh * g.KW;
        if (ih < 0 || ih >= g.H) {
          f(r, t0, int64_t{-1}, g.KW);
          continue;
        }
        if (g.dw != 1) {
          for (int64_t kw = 0; kw < g.KW; ++kw) {
            const int64_t iw = iw0 + kw * g.dw;
            f(r, t0 + kw, iw >= 0 && iw < g.W ? ih * g.W + iw : int64_t{-1}, int64_t{1});
          }
          continue;
        }
        const int64_t lo = std::clamp<int64_t>(-iw0, 0, g.KW), hi = std::clamp<int64_t>(g.W - iw0, lo, g.KW);
        if (lo > 0) f(r, t0, int64_t{-1}, lo);
        if (hi > lo) f(r, t0 + lo, ih * g.W + iw0 + lo, hi - lo);
        if (hi < g.KW) f(r, t0 + hi, int64_t{-1}, g.KW - hi);
      }
    }
}

// One image: rows [OHW, KH*KW*C] of patches from xt [HW, C].
template <typename T>
void im2row(const T* xt, T* rows, const ConvGeometry& g) {
  const int64_t C = g.C, Kp = g.KH * g.KW * C;
  for_each_run(g, [&](int64_t r, int64_t tap, int64_t pix, int64_t n) {
    T* d = rows + r * Kp + tap * C;
    const int64_t len = n * C;
    if (pix < 0) {
      std::fill(d, d + len, T(0));
      return;
    }
    const T* src = xt + pix * C;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) d[i] = src[i];
  });
}

// weight [OC, C, KH, KW] -> [OC, KH, KW, C]
template <typename T>
std::vector<T> weight_channels_last(const T* w, const ConvGeometry& g) {
  const int64_t KK = g.KH * g.KW;
  std::vector<T> r(static_cast<size_t>(g.OC * KK * g.C));
  for (int64_t oc = 0; oc < g.OC; ++oc)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t k = 0; k < KK; ++k) r[(oc * KK + k) * g.C + c] = w[(oc * g.C + c) * KK + k];
  return r;
}

// ------------------------------------------------------------------ Winograd F(2x2, 3x3) and F(2x2, 5x5)
// For the 3x3 and 5x5, stride-1 convolutions of small images the channels-last path takes (MNIST's
// c2: 32 -> 64 channels, 13x13 -> 11x11; the DCGAN generator's first transposed convolution, 256 ->
// 128 channels at 7x7) the multiply-adds drop from 36 to 16, or from 100 to 36, per tile of 2x2
// outputs and channel pair (conv_winograd.h), in all three passes: the forward; the input gradient,
// which is the output gradient convolved with the filters turned half a circle and their channels
// swapped, padded by r - 1 - padding (conv_transpose2d's forward of a stride-1 3x3 or 5x5 runs it
// too); and the weight gradient, the forward's transforms run backwards. MnistCnn's training step at
// two threads on Zen 5: 285 GFLOP/s direct, 308 with the forward on Winograd, 314 with the input
// gradient, 343 with all three (nominal FLOP, as every rate here: the direct form's count).
// Below 6x6 outputs (MNIST's c3: 3x3) the clipped tiles waste more than the form saves.
constexpr int64_t kWinogradBytes = int64_t{1} << 20, kWinogradMinRows = 64;

// Not F(2x2, 5x5) for a bfloat16 layer: its transforms (B^T's entries up to 5/2, G's fifteenths)
// grow the rounding of operands to bfloat16 about 9x over the direct form's (3.5% against 0.4%
// on random data, 128 channels); F(2x2, 3x3)'s grow it less than 2x.
bool use_winograd(const ConvGeometry& g) {
  if (g.KH == 5 && g.bf16_gemms) return false;
  const bool square = (g.KH == 3 || g.KH == 5) && g.KW == g.KH;
  return square && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 && g.ph < g.KH && g.pw < g.KW &&
         g.C >= 8 && g.OC >= 8 && g.OH >= 6 && g.OW >= 6;
}

// Runs f(form) with the transforms of g's filter size (use_winograd has checked it is 3 or 5).
template <typename F>
void with_form(const ConvGeometry& g, F f) {
  if (g.KH == 5)
    f(cpu::winograd::F2x5{});
  else
    f(cpu::winograd::F2x3{});
}

// Whether a layer's GEMMs run on the packed-panel kernel of core/cpu/panel_gemm.h instead of BLAS:
// the Winograd products of the forward and the input gradient (BLAS repacked the filters' transform
// for each of a chunk's a^2 products, 36 of K = C rows each for 5x5, and the transformed tiles as
// well; here the filters are packed once per call and the tiles read in place) and the
// channels-last path's forward and input gradient (its filters packed once per call instead of once
// per chunk, the patch rows and the output gradient read in place, no pass zeroing the result). The
// weight gradients stay on BLAS: on the panel kernel (one operand read down its columns, the other
// packed per chunk) the DCGAN's Winograd layer ran 2-3% slower and its stride-2 layers no faster.
// On a Zen 3 VM (avx2) at one thread, the training steps: MnistCnn about 15-20% faster, the DCGAN
// about 5%; in one process, the path toggled, forward and backward: its 256 -> 128 Winograd layer
// 128.4 -> 117.7 ms, its stride-2 convolution 49.9 -> 47.2 ms and transposed one 49.0 -> 46.8 ms.
// On a Zen 5 VM (avx512, OpenBLAS's SkylakeX kernels beside it), the DCGAN 3-7% faster at one and
// two threads, MnistCnn level. Only where the level's float kernel is a vector one (panel_gemm.h),
// and not for bfloat16 layers (their GEMMs are bf16_gemm.h's).
template <typename T>
bool panel_gemms(const ConvGeometry& g) {
  return std::is_same_v<T, float> && cpu::panel::kVectorFloatKernel && !g.bf16_gemms;
}

// An operand of n values packed for the panel kernel (64-byte aligned, as its loads need), read
// by every chunk of a call.
template <typename T>
Tensor panel_buffer(int64_t n) {
  return empty({n}, TensorOptions{dtype_of<T>()});
}

// panel_gemm.h's pack() with the panels spread across threads: the chunks' GEMMs that read them are
// spread too, and one thread packing while the others waited cost MnistCnn's step 2-3% at two
// threads on a Zen 5 VM (OpenBLAS packs inside each chunk's GEMM, in parallel).
template <typename T, typename Elem>
void pack_across_threads(int64_t K, int64_t N, T* p, const Elem& elem) {
  parallel_for(0, cpu::panel::panel_count(N), 1,
               [&](int64_t q0, int64_t q1) { cpu::panel::pack_panels<T>(K, N, q0, q1, p, elem); });
}

// The filters' transform u [a^2, C, OC] packed for the panel kernel, each point's [C, OC] one
// operand; an empty tensor when the layer's GEMMs run on BLAS.
template <typename Form, typename T>
Tensor winograd_packed_filters(const T* u, const ConvGeometry& g) {
  if (!panel_gemms<T>(g)) return Tensor();
  constexpr int AA = Form::kA * Form::kA;
  const int64_t per_point = cpu::panel::packed_size(g.C, g.OC);
  Tensor packed = panel_buffer<T>(AA * per_point);
  T* p = packed.data_ptr<T>();
  parallel_for(0, AA, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      cpu::panel::pack(g.C, g.OC, p + k * per_point,
                       [&](int64_t c, int64_t oc) { return u[(k * g.C + c) * g.OC + oc]; });
  });
  return packed;
}

// Chunks of images whose transformed input and GEMM results (a^2 values per tile and channel) stay
// within kWinogradBytes, so that the GEMMs find them in L2: on Zen 5 (1 MiB of L2) chunks of 3 of
// MNIST's c2 images (108 tiles, 0.7 MiB) made the training step at two threads about 3% faster
// than chunks of 8 (288 tiles). But never GEMMs of fewer than kWinogradMinRows rows: one image of
// the DCGAN's 7x7, 256 -> 128 layer (16 tiles, 0.9 MiB) fills the budget, and 36 GEMMs of 16 rows
// spent their time packing the filters' transform; at 64 rows (4 images) the DCGAN's step ran about
// 5% faster on a Zen 3 VM, at 128-1024 rows 3-5%. Chunks are equal, not 14 images and 2.
template <typename Form, typename T>
Plan winograd_plan(const ConvGeometry& g) {
  constexpr int64_t AA = Form::kA * Form::kA;
  const int64_t tile_bytes = AA * (g.C + g.OC) * static_cast<int64_t>(sizeof(T));
  const int64_t tt = cpu::winograd::tiles(g);
  Plan plan =
      make_plan_of(g, std::max<int64_t>({1, kWinogradBytes / (tt * tile_bytes), (kWinogradMinRows + tt - 1) / tt}));
  plan.per_chunk = (g.N + plan.chunks - 1) / std::max<int64_t>(1, plan.chunks);
  return plan;
}

// out [N, OC, OH, OW] (+ bias) from in [N, C, H, W] through u = the filters' transform
// [a^2, C, OC]. Chunks of images whose tiles make GEMMs of a few hundred rows.
template <typename Form, typename T>
void winograd_conv(T* o, const T* in, const T* u, const T* bp, const ConvGeometry& g) {
  constexpr int AA = Form::kA * Form::kA;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, TT = cpu::winograd::tiles(g);
  const Plan plan = winograd_plan<Form, T>(g);
  const std::vector<T> zeros(static_cast<size_t>(g.C), T(0));
  const Tensor packed = winograd_packed_filters<Form>(u, g);
  const int64_t per_point = cpu::panel::packed_size(g.C, g.OC);
  run_chunks(plan, g.N, [&](int, int64_t n0, int64_t nb) {
    const int64_t rows = nb * TT, ldv = rows * g.C, ldm = rows * g.OC;
    T* xt = scratch<T>(2, HW * g.C);
    T* v = scratch<T>(0, std::max(AA * ldv, OHW * g.OC));
    T* m = scratch<T>(1, AA * ldm);
    for (int64_t j = 0; j < nb; ++j) {
      to_channels_last(in + (n0 + j) * g.C * HW, xt, g.C, HW);
      cpu::winograd::input<Form>(xt, v + j * TT * g.C, ldv, g, zeros.data());
    }
    for (int k = 0; k < AA; ++k) {
      if (packed.defined())
        cpu::panel::gemm_packed<cpu::panel::ALayout::kRows>(
            rows, g.OC, g.C, v + k * ldv, g.C, packed.data_ptr<T>() + k * per_point, m + k * ldm, g.OC, false);
      else
        gemm(g, false, false, rows, g.OC, g.C, T(1), v + k * ldv, g.C, u + k * g.C * g.OC, g.OC, T(0), m + k * ldm,
             g.OC);
    }
    T* ot = v;  // the input's transform is spent
    for (int64_t j = 0; j < nb; ++j) {
      cpu::winograd::output<Form>(m + j * TT * g.OC, ldm, ot, g);
      from_channels_last(ot, o + (n0 + j) * g.OC * OHW, g.OC, OHW, bp);
    }
  });
}

// The filters' transform [a^2, C, OC] for the convolution of geometry g, tap(oc, c, kh, kw) its
// filter taps. The taps are laid out output channels innermost a block of 16 at a time: each
// block reads 16 filters' r^2 taps and writes r^2 runs of 16; looping over output channels outside
// the taps wrote every value to another cache line, 3.6% of the DCGAN's 256 -> 128 transposed
// convolution's forward and backward on a Zen 3 VM.
template <typename Form, typename T, typename Tap>
std::vector<T> winograd_filters(const ConvGeometry& g, const Tap& tap) {
  constexpr int R = Form::kR, RR = R * R, AA = Form::kA * Form::kA;
  constexpr int64_t kBlock = 16;
  std::vector<T> wt(static_cast<size_t>(RR * g.C * g.OC)), u(static_cast<size_t>(AA * g.C * g.OC));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t o0 = 0; o0 < g.OC; o0 += kBlock) {
      const int64_t o1 = std::min(g.OC, o0 + kBlock);
      for (int k = 0; k < RR; ++k)
        for (int64_t oc = o0; oc < o1; ++oc) wt[(c * RR + k) * g.OC + oc] = tap(oc, c, k / R, k % R);
    }
  cpu::winograd::filter<Form>(wt.data(), u.data(), g.C, g.OC);
  return u;
}

template <typename T>
void winograd_forward(T* o, const T* in, const T* w, const T* bp, const ConvGeometry& g) {
  with_form(g, [&]<typename Form>(Form) {
    constexpr int R = Form::kR;
    const std::vector<T> u = winograd_filters<Form, T>(
        g, [&](int64_t oc, int64_t c, int kh, int kw) { return w[((oc * g.C + c) * R + kh) * R + kw]; });
    winograd_conv<Form>(o, in, u.data(), bp, g);
  });
}

// The input gradient as a convolution of the output gradient: channels OC -> C, each filter
// w[oc, c] turned half a circle, padding r - 1 - padding, the input's size as its output.
template <typename T>
void winograd_backward_input(T* gi, const T* go, const T* w, const T* bp, const ConvGeometry& g) {
  with_form(g, [&]<typename Form>(Form) {
    constexpr int R = Form::kR;
    ConvGeometry t = g;
    t.C = g.OC, t.OC = g.C, t.H = g.OH, t.W = g.OW, t.OH = g.H, t.OW = g.W, t.ph = R - 1 - g.ph, t.pw = R - 1 - g.pw;
    const std::vector<T> u = winograd_filters<Form, T>(t, [&](int64_t c, int64_t oc, int kh, int kw) {
      return w[((oc * g.C + c) * R + (R - 1 - kh)) * R + (R - 1 - kw)];
    });
    winograd_conv<Form>(gi, go, u.data(), bp, t);
  });
}

// gw [OC, C, r, r] from the output gradient and the input: per chunk the input's tiles transformed
// as in the forward and the output gradient's by output()'s adjoint, a^2 GEMMs [C, tiles] x
// [tiles, OC] summed into a per-thread [a^2, C, OC], and at the end filter()'s adjoint.
template <typename Form, typename T>
void winograd_backward_weight_form(T* gw, const T* go, const T* in, const ConvGeometry& g) {
  constexpr int AA = Form::kA * Form::kA;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, TT = cpu::winograd::tiles(g), usize = AA * g.C * g.OC;
  const Plan plan = winograd_plan<Form, T>(g);
  std::vector<T> acc(static_cast<size_t>(plan.threads * usize), T(0));
  const std::vector<T> zeros(static_cast<size_t>(std::max(g.C, g.OC)), T(0));
  run_chunks(plan, g.N, [&](int tid, int64_t n0, int64_t nb) {
    const int64_t rows = nb * TT, ldv = rows * g.C, ldm = rows * g.OC;
    T* xt = scratch<T>(2, std::max(HW * g.C, OHW * g.OC));
    T* v = scratch<T>(0, AA * ldv);
    T* m = scratch<T>(1, AA * ldm);
    for (int64_t j = 0; j < nb; ++j) {
      to_channels_last(in + (n0 + j) * g.C * HW, xt, g.C, HW);
      cpu::winograd::input<Form>(xt, v + j * TT * g.C, ldv, g, zeros.data());
      to_channels_last(go + (n0 + j) * g.OC * OHW, xt, g.OC, OHW);
      cpu::winograd::output_grad<Form>(xt, m + j * TT * g.OC, ldm, g, zeros.data());
    }
    T* du = acc.data() + tid * usize;
    for (int k = 0; k < AA; ++k)
      gemm(g, true, false, g.C, g.OC, rows, T(1), v + k * ldv, g.C, m + k * ldm, g.OC, T(1), du + k * g.C * g.OC, g.OC);
  });
  for (int t = 1; t < plan.threads; ++t)
    for (int64_t i = 0; i < usize; ++i) acc[i] += acc[t * usize + i];
  cpu::winograd::filter_grad<Form>(acc.data(), gw, g.C, g.OC);
}

template <typename T>
void winograd_backward_weight(T* gw, const T* go, const T* in, const ConvGeometry& g) {
  with_form(g, [&]<typename Form>(Form) { winograd_backward_weight_form<Form>(gw, go, in, g); });
}

// The channels-last filters wt [OC, Kp] (weight_channels_last) packed for the panel kernel: as
// [Kp, OC] for the forward, as they are (by_output_channel) for the input gradient; an empty tensor
// when the layer's GEMMs run on BLAS.
template <typename T>
Tensor cl_packed_filters(const std::vector<T>& wt, const ConvGeometry& g, bool by_output_channel) {
  if (!panel_gemms<T>(g)) return Tensor();
  const int64_t Kp = g.KH * g.KW * g.C;
  Tensor packed =
      panel_buffer<T>(by_output_channel ? cpu::panel::packed_size(g.OC, Kp) : cpu::panel::packed_size(Kp, g.OC));
  if (by_output_channel)
    pack_across_threads(g.OC, Kp, packed.data_ptr<T>(), [&](int64_t oc, int64_t k) { return wt[oc * Kp + k]; });
  else
    pack_across_threads(Kp, g.OC, packed.data_ptr<T>(), [&](int64_t k, int64_t oc) { return wt[oc * Kp + k]; });
  return packed;
}

template <typename T>
void cl_forward(T* o, const T* in, const T* w, const T* bp, const ConvGeometry& g) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, Kp = g.KH * g.KW * g.C;
  const std::vector<T> wt = weight_channels_last(w, g);
  const Tensor packed = cl_packed_filters(wt, g, false);
  const Plan plan = make_plan(g, true);
  run_chunks(plan, g.N, [&](int, int64_t n0, int64_t nb) {
    const int64_t rows = nb * OHW;
    T* xt = scratch<T>(2, HW * g.C);
    T* a = scratch<T>(0, rows * Kp);
    T* ot = scratch<T>(1, rows * g.OC);
    for (int64_t j = 0; j < nb; ++j) {
      to_channels_last(in + (n0 + j) * g.C * HW, xt, g.C, HW);
      im2row(xt, a + j * OHW * Kp, g);
    }
    if (packed.defined())
      cpu::panel::gemm_packed<cpu::panel::ALayout::kRows>(rows, g.OC, Kp, a, Kp, packed.data_ptr<T>(), ot, g.OC, false);
    else
      gemm(g, false, true, rows, g.OC, Kp, T(1), a, Kp, wt.data(), Kp, T(0), ot, g.OC);
    for (int64_t j = 0; j < nb; ++j) from_channels_last(ot + j * OHW * g.OC, o + (n0 + j) * g.OC * OHW, g.OC, OHW, bp);
  });
}

template <typename T>
void cl_backward_input(T* gi, const T* go, const T* w, const T* bp, const ConvGeometry& g) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, Kp = g.KH * g.KW * g.C;
  const std::vector<T> wt = weight_channels_last(w, g);
  const Tensor packed = cl_packed_filters(wt, g, true);
  const Plan plan = make_plan(g, true);
  run_chunks(plan, g.N, [&](int, int64_t n0, int64_t nb) {
    const int64_t rows = nb * OHW;
    T* got = scratch<T>(1, rows * g.OC);
    T* da = scratch<T>(0, rows * Kp);
    T* xt = scratch<T>(2, HW * g.C);
    // The output gradient as [OC, pixels], read transposed by the GEMM (a single image is that
    // matrix already).
    const T* goc = go + n0 * g.OC * OHW;
    if (nb > 1) {
      images_side_by_side(goc, got, g.OC, OHW, nb);
      goc = got;
    }
    if (packed.defined())  // goc read down its columns
      cpu::panel::gemm_packed<cpu::panel::ALayout::kColumns>(rows, Kp, g.OC, goc, rows, packed.data_ptr<T>(), da, Kp,
                                                             false);
    else
      gemm(g, true, false, rows, Kp, g.OC, T(1), goc, rows, wt.data(), Kp, T(0), da, Kp);
    for (int64_t j = 0; j < nb; ++j) {
      std::fill(xt, xt + HW * g.C, T(0));
      const T* dj = da + j * OHW * Kp;
      for_each_run(g, [&](int64_t r, int64_t tap, int64_t pix, int64_t n) {
        if (pix < 0) return;
        const T* s = dj + r * Kp + tap * g.C;
        T* d = xt + pix * g.C;
        const int64_t len = n * g.C;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) d[i] += s[i];
      });
      from_channels_last(xt, gi + (n0 + j) * g.C * HW, g.C, HW, bp);
    }
  });
}

template <typename T>
void cl_backward_weight(T* gw, const T* go, const T* in, const ConvGeometry& g) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW, KK = g.KH * g.KW, Kp = KK * g.C;
  const int64_t wsize = g.OC * Kp;
  const Plan plan = make_plan(g, true);
  std::vector<T> acc(static_cast<size_t>(plan.threads * wsize), T(0));
  run_chunks(plan, g.N, [&](int tid, int64_t n0, int64_t nb) {
    const int64_t rows = nb * OHW;
    T* xt = scratch<T>(2, HW * g.C);
    T* a = scratch<T>(0, rows * Kp);
    T* got = scratch<T>(1, rows * g.OC);
    for (int64_t j = 0; j < nb; ++j) {
      to_channels_last(in + (n0 + j) * g.C * HW, xt, g.C, HW);
      im2row(xt, a + j * OHW * Kp, g);
    }
    const T* goc = go + n0 * g.OC * OHW;  // [OC, pixels], as in cl_backward_input
    if (nb > 1) {
      images_side_by_side(goc, got, g.OC, OHW, nb);
      goc = got;
    }
    gemm(g, false, false, g.OC, Kp, rows, T(1), goc, rows, a, Kp, T(1), acc.data() + tid * wsize, Kp);
  });
  for (int64_t oc = 0; oc < g.OC; ++oc)
    for (int64_t k = 0; k < KK; ++k)
      for (int64_t c = 0; c < g.C; ++c) {
        T s = 0;
        for (int t = 0; t < plan.threads; ++t) s += acc[t * wsize + (oc * KK + k) * g.C + c];
        gw[(oc * g.C + c) * KK + k] = s;
      }
}

// ------------------------------------------------------------------ forward

template <typename T>
void forward_impl(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const ConvGeometry& g) {
  const T* in = static_cast<const T*>(input.raw_data());
  const T* w = static_cast<const T*>(weight.raw_data());
  const T* bp = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  T* o = static_cast<T*>(out.raw_data());
  const int64_t G = g.groups, Cg = g.C / G, OCg = g.OC / G, K = Cg * g.KH * g.KW;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  if (g.N == 0 || OHW == 0) return;

  if (is_depthwise(g)) {
    const int64_t planes = g.N * g.C;
    parallel_for(0, planes, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, OHW * K)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t p = b; p < e; ++p) {
                     const int64_t c = p % g.C;
                     depthwise_plane_forward(o + p * OHW, in + p * HW, w + c * K, bp ? bp[c] : T(0), g);
                   }
                 });
    return;
  }

  if (use_channels_last(g) && !is_pointwise(g)) {
    if (use_winograd(g))
      winograd_forward(o, in, w, bp, g);
    else
      cl_forward(o, in, w, bp, g);
    return;
  }

  const bool pointwise = is_pointwise(g);
  const Plan plan = make_plan(g, !pointwise);
  const int64_t rows = tile_rows<T>(g, K);
  run_chunks(plan, g.N, [&](int, int64_t n0, int64_t nb) {
    const int64_t cols = nb * OHW;
    T* col = pointwise ? nullptr : scratch<T>(0, K * (nb == 1 ? rows * g.OW : cols));
    T* tmp = nb > 1 ? scratch<T>(1, OCg * cols) : nullptr;
    for (int64_t grp = 0; grp < G; ++grp) {
      const T* wg = w + grp * OCg * K;
      if (nb == 1) {
        T* dst = o + (n0 * g.OC + grp * OCg) * OHW;
        if (bp)
          for (int64_t oc = 0; oc < OCg; ++oc) std::fill(dst + oc * OHW, dst + (oc + 1) * OHW, bp[grp * OCg + oc]);
        const T* src = in + (n0 * g.C + grp * Cg) * HW;
        if (pointwise) {
          gemm(g, false, false, OCg, OHW, K, T(1), wg, K, src, OHW, bp ? T(1) : T(0), dst, OHW);
          continue;
        }
        for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows) {
          const int64_t oh1 = std::min(g.OH, oh0 + rows), tc = (oh1 - oh0) * g.OW;
          im2col(src, col, tc, Cg, g, oh0, oh1);
          gemm(g, false, false, OCg, tc, K, T(1), wg, K, col, tc, bp ? T(1) : T(0), dst + oh0 * g.OW, OHW);
        }
        continue;
      }
      for (int64_t j = 0; j < nb; ++j)
        im2col(in + ((n0 + j) * g.C + grp * Cg) * HW, col + j * OHW, cols, Cg, g, 0, g.OH);
      gemm(g, false, false, OCg, cols, K, T(1), wg, K, col, cols, T(0), tmp, cols);
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t oc = 0; oc < OCg; ++oc) {
          const T* s = tmp + oc * cols + j * OHW;
          T* d = o + ((n0 + j) * g.OC + grp * OCg + oc) * OHW;
          const T bv = bp ? bp[grp * OCg + oc] : T(0);
#pragma omp simd
          for (int64_t i = 0; i < OHW; ++i) d[i] = s[i] + bv;
        }
    }
  });
}

// ------------------------------------------------------------------ backward: input

template <typename T>
void backward_input_impl(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight, const Tensor& bias,
                         const ConvGeometry& g) {
  T* gi = static_cast<T*>(grad_input.raw_data());
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const T* w = static_cast<const T*>(weight.raw_data());
  const T* bp = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
  const int64_t G = g.groups, Cg = g.C / G, OCg = g.OC / G, K = Cg * g.KH * g.KW;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  if (g.N == 0 || HW == 0) return;

  auto add_bias = [&](int64_t n) {
    if (!bp) return;
    for (int64_t c = 0; c < g.C; ++c) {
      T* d = gi + (n * g.C + c) * HW;
      const T bv = bp[c];
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) d[i] += bv;
    }
  };

  if (is_depthwise(g)) {
    depthwise_backward_input(gi, go, w, bp, g);
    return;
  }

  if (use_channels_last(g) && !is_pointwise(g)) {
    if (use_winograd(g))
      winograd_backward_input(gi, go, w, bp, g);
    else
      cl_backward_input(gi, go, w, bp, g);
    return;
  }

  const bool pointwise = is_pointwise(g);
  const Plan plan = make_plan(g, !pointwise);
  const int64_t rows = tile_rows<T>(g, K);
  run_chunks(plan, g.N, [&](int, int64_t n0, int64_t nb) {
    const int64_t cols = nb * OHW;
    T* col = pointwise ? nullptr : scratch<T>(0, K * (nb == 1 ? rows * g.OW : cols));
    T* tmp = nb > 1 ? scratch<T>(1, OCg * cols) : nullptr;
    for (int64_t grp = 0; grp < G; ++grp) {
      const T* wg = w + grp * OCg * K;
      if (pointwise) {  // nb == 1
        gemm(g, true, false, Cg, HW, OCg, T(1), wg, K, go + (n0 * g.OC + grp * OCg) * OHW, OHW, T(0),
             gi + (n0 * g.C + grp * Cg) * HW, HW);
        continue;
      }
      if (nb == 1) {
        T* img = gi + (n0 * g.C + grp * Cg) * HW;
        std::fill(img, img + Cg * HW, T(0));
        const T* src = go + (n0 * g.OC + grp * OCg) * OHW;
        for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows) {
          const int64_t oh1 = std::min(g.OH, oh0 + rows), tc = (oh1 - oh0) * g.OW;
          gemm(g, true, false, K, tc, OCg, T(1), wg, K, src + oh0 * g.OW, OHW, T(0), col, tc);
          col2im(col, tc, img, Cg, g, oh0, oh1);
        }
        continue;
      }
      // several small images: gather their gradients side by side, one GEMM, col2im each
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t oc = 0; oc < OCg; ++oc)
          std::memcpy(tmp + oc * cols + j * OHW, go + ((n0 + j) * g.OC + grp * OCg + oc) * OHW,
                      static_cast<size_t>(OHW) * sizeof(T));
      gemm(g, true, false, K, cols, OCg, T(1), wg, K, tmp, cols, T(0), col, cols);
      for (int64_t j = 0; j < nb; ++j) {
        T* img = gi + ((n0 + j) * g.C + grp * Cg) * HW;
        std::fill(img, img + Cg * HW, T(0));
        col2im(col + j * OHW, cols, img, Cg, g, 0, g.OH);
      }
    }
    for (int64_t j = 0; j < nb; ++j) add_bias(n0 + j);
  });
}

// ------------------------------------------------------------------ backward: weight and bias

// The bias gradient: a plain sum over each output plane, the images' partial sums accumulated in
// double (so that a large batch loses no precision).
template <typename T>
void bias_gradient(T* gb, const T* go, const ConvGeometry& g) {
  const int64_t OHW = g.OH * g.OW;
  std::vector<double> acc(static_cast<size_t>(g.OC), 0.0);
  parallel_for(0, g.OC, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, g.N * OHW)),
               [&](int64_t b, int64_t e) {
                 for (int64_t oc = b; oc < e; ++oc) {
                   double s = 0.0;
                   for (int64_t n = 0; n < g.N; ++n) {
                     const T* p = go + (n * g.OC + oc) * OHW;
                     T part = 0;
#pragma omp simd reduction(+ : part)
                     for (int64_t i = 0; i < OHW; ++i) part += p[i];
                     s += static_cast<double>(part);
                   }
                   acc[oc] = s;
                 }
               });
  for (int64_t oc = 0; oc < g.OC; ++oc) gb[oc] = static_cast<T>(acc[oc]);
}

template <typename T>
void backward_weight_impl(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                          const Tensor& input, const ConvGeometry& g) {
  T* gw = grad_weight.defined() ? static_cast<T*>(grad_weight.raw_data()) : nullptr;
  T* gb = grad_bias.defined() ? static_cast<T*>(grad_bias.raw_data()) : nullptr;
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const T* in = static_cast<const T*>(input.raw_data());
  const int64_t G = g.groups, Cg = g.C / G, OCg = g.OC / G, K = Cg * g.KH * g.KW;
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  const int64_t wsize = g.OC * K;
  if (gw) std::fill(gw, gw + wsize, T(0));

  if (gb) bias_gradient(gb, go, g);
  if (!gw || g.N == 0 || OHW == 0) return;

  if (is_depthwise(g)) {
    depthwise_backward_weight(gw, go, in, g);
    return;
  }

  if (use_channels_last(g) && !is_pointwise(g)) {
    if (use_winograd(g))
      winograd_backward_weight(gw, go, in, g);
    else
      cl_backward_weight(gw, go, in, g);
    return;
  }

  const bool pointwise = is_pointwise(g);
  const Plan plan = make_plan(g, !pointwise);
  // Thread 0 accumulates into grad_weight itself, the others into partial sums added at the end.
  std::vector<T> partial(static_cast<size_t>(std::max(0, plan.threads - 1)) * static_cast<size_t>(wsize), T(0));
  const int64_t rows = tile_rows<T>(g, K);
  run_chunks(plan, g.N, [&](int tid, int64_t n0, int64_t nb) {
    T* acc = tid == 0 ? gw : partial.data() + static_cast<size_t>(tid - 1) * static_cast<size_t>(wsize);
    const int64_t cols = nb * OHW;
    T* col = pointwise ? nullptr : scratch<T>(0, K * (nb == 1 ? rows * g.OW : cols));
    T* tmp = nb > 1 ? scratch<T>(1, OCg * cols) : nullptr;
    for (int64_t grp = 0; grp < G; ++grp) {
      T* accg = acc + grp * OCg * K;
      if (pointwise) {  // nb == 1
        gemm(g, false, true, OCg, Cg, HW, T(1), go + (n0 * g.OC + grp * OCg) * OHW, OHW,
             in + (n0 * g.C + grp * Cg) * HW, HW, T(1), accg, K);
        continue;
      }
      if (nb == 1) {
        const T* x = in + (n0 * g.C + grp * Cg) * HW;
        const T* src = go + (n0 * g.OC + grp * OCg) * OHW;
        for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows) {
          const int64_t oh1 = std::min(g.OH, oh0 + rows), tc = (oh1 - oh0) * g.OW;
          im2col(x, col, tc, Cg, g, oh0, oh1);
          gemm(g, false, true, OCg, K, tc, T(1), src + oh0 * g.OW, OHW, col, tc, T(1), accg, K);
        }
        continue;
      }
      for (int64_t j = 0; j < nb; ++j)
        im2col(in + ((n0 + j) * g.C + grp * Cg) * HW, col + j * OHW, cols, Cg, g, 0, g.OH);
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t oc = 0; oc < OCg; ++oc)
          std::memcpy(tmp + oc * cols + j * OHW, go + ((n0 + j) * g.OC + grp * OCg + oc) * OHW,
                      static_cast<size_t>(OHW) * sizeof(T));
      gemm(g, false, true, OCg, K, cols, T(1), tmp, cols, col, cols, T(1), accg, K);
    }
  });
  for (int t = 1; t < plan.threads; ++t) {
    const T* p = partial.data() + static_cast<size_t>(t - 1) * static_cast<size_t>(wsize);
#pragma omp simd
    for (int64_t i = 0; i < wsize; ++i) gw[i] += p[i];
  }
}

// 16-bit tensors run the float32 code around them (core/cpu/lowp_reference.h); for bfloat16 its
// GEMMs, which carry the FLOPs, take bfloat16 operands (vdpbf16ps where the CPU has it).
ConvGeometry lowp_geometry(const ConvGeometry& g, DType dtype) {
  ConvGeometry b = g;
  b.bf16_gemms = dtype == DType::BFloat16;
  return b;
}

void cpu_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const ConvGeometry& g) {
  if (cpu::lowp::is_16bit(input.dtype())) {  // float32 code around 16-bit data
    const Tensor o = cpu::lowp::float32_for(out);
    forward_impl<float>(o, cpu::lowp::widen(input), cpu::lowp::widen(weight), cpu::lowp::widen(bias),
                        lowp_geometry(g, input.dtype()));
    cpu::lowp::narrow_into(out, o);
    return;
  }
  EMBER_DISPATCH_FLOAT(input.dtype(), "conv2d", [&] { forward_impl<scalar_t>(out, input, weight, bias, g); });
}

void cpu_conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                               const Tensor& bias, const ConvGeometry& g) {
  if (cpu::lowp::is_16bit(grad_out.dtype())) {  // float32 code around 16-bit data
    const Tensor gi = cpu::lowp::float32_for(grad_input);
    backward_input_impl<float>(gi, cpu::lowp::widen(grad_out), cpu::lowp::widen(weight), cpu::lowp::widen(bias),
                               lowp_geometry(g, grad_out.dtype()));
    cpu::lowp::narrow_into(grad_input, gi);
    return;
  }
  EMBER_DISPATCH_FLOAT(grad_out.dtype(), "conv2d_backward",
                       [&] { backward_input_impl<scalar_t>(grad_input, grad_out, weight, bias, g); });
}

void cpu_conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                                const Tensor& input, const ConvGeometry& g) {
  if (cpu::lowp::is_16bit(grad_out.dtype())) {  // float32 code around 16-bit data
    const Tensor gw = cpu::lowp::float32_for(grad_weight), gb = cpu::lowp::float32_for(grad_bias);
    backward_weight_impl<float>(gw, gb, cpu::lowp::widen(grad_out), cpu::lowp::widen(input),
                                lowp_geometry(g, grad_out.dtype()));
    cpu::lowp::narrow_into(grad_weight, gw);
    cpu::lowp::narrow_into(grad_bias, gb);
    return;
  }
  EMBER_DISPATCH_FLOAT(grad_out.dtype(), "conv2d_backward",
                       [&] { backward_weight_impl<scalar_t>(grad_weight, grad_bias, grad_out, input, g); });
}

}  // namespace

EMBER_REGISTER_KERNEL(conv2d_forward_stub, CPU, cpu_conv2d_forward);
EMBER_REGISTER_KERNEL(conv2d_backward_input_stub, CPU, cpu_conv2d_backward_input);
EMBER_REGISTER_KERNEL(conv2d_backward_weight_stub, CPU, cpu_conv2d_backward_weight);

}  // namespace ember
