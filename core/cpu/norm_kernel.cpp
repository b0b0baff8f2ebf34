// CPU batch norm and layer norm, forward and fused backward. Statistics and the gradient sums
// accumulate in double whatever the dtype: a float32 sum over a large batch loses digits that
// the variance, a difference of nearly equal numbers, cannot spare. For the same reason the saved
// statistics are float64 tensors, and x - mean is formed before any scaling: with the mean split
// into a float head and tail, (x - head) - tail keeps the digits that x * scale + shift, a small
// difference of two large products, would lose on data far from zero.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/element_ptr.h"
#include "core/nn_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

// Sums over the N * S elements of each channel of x [N, C, S]: f(c) gets called with a visitor
// that walks channel c's contiguous runs. For S == 1 ([N, C] input) the channel is a strided
// column, so rows are walked instead, with per-thread partial sums.
template <typename T, typename RowFn>
void per_channel_double(int64_t N, int64_t C, int64_t S, std::vector<double>& out, const RowFn& run_sum) {
  // run_sum(c, n) -> double sum of channel c's run in image n (S elements)
  out.assign(static_cast<size_t>(C), 0.0);
  parallel_for(0, C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, N * S)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += run_sum(c, n);
      out[c] = s;
    }
  });
}

template <typename T>
double run_total(const T* p, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]);
  return s;
}

template <typename T>
double run_sq_dev(const T* p, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(p[i]) - mean;
    s += d * d;
  }
  return s;
}

// The mean as a head in T and the remainder, so that (x - head) - tail is x - mean to T's precision.
template <typename T>
struct SplitMean {
  T head, tail;
  explicit SplitMean(double m) : head(static_cast<T>(m)), tail(static_cast<T>(m - static_cast<double>(head))) {}
};

// y = (x - mean[c]) * scale[c] + shift[c] over [N, C, S].
template <typename T>
void normalise_channels(T* y, const T* x, const std::vector<double>& mean, const std::vector<T>& scale,
                        const std::vector<T>& shift, int64_t N, int64_t C, int64_t S) {
  std::vector<T> head(static_cast<size_t>(C)), tail(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    SplitMean<T> m(mean[c]);
    head[c] = m.head, tail[c] = m.tail;
  }
  if (S == 1) {
    parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        const T* xr = x + n * C;
        T* yr = y + n * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) yr[c] = ((xr[c] - head[c]) - tail[c]) * scale[c] + shift[c];
      }
    });
    return;
  }
  parallel_for(0, N * C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, S)), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t c = nc % C;
      const T a = scale[c], sh = shift[c], hd = head[c], tl = tail[c];
      const T* xr = x + nc * S;
      T* yr = y + nc * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) yr[i] = ((xr[i] - hd) - tl) * a + sh;
    }
  });
}

// Splits [0, n) into at most get_num_threads() chunks of at least `grain` and calls
// f(chunk, begin, end) for each, in parallel; returns the number of chunks (for partial sums
// indexed by chunk, which unlike thread ids stay in range in nested or serial runs).
template <typename F>
int64_t parallel_chunks(int64_t n, int64_t grain, const F& f) {
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int64_t chunks = std::clamp<int64_t>(get_num_threads(), 1, max_chunks);
  const int64_t per = (n + chunks - 1) / chunks;
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) f(k, k * per, std::min(n, (k + 1) * per));
  });
  return chunks;
}

// Per-channel double sums of f(x) for an [N, C] input, row by row (channels are columns).
template <typename T, typename F>
std::vector<double> column_sums(const T* x, int64_t N, int64_t C, const F& f) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C));
  const int64_t max_chunks = std::max<int64_t>(1, std::max<int64_t>(1, get_num_threads()));
  std::vector<double> part(static_cast<size_t>(max_chunks * C), 0.0);
  const int64_t chunks = parallel_chunks(N, grain, [&](int64_t k, int64_t b, int64_t e) {
    double* acc = part.data() + k * C;
    for (int64_t n = b; n < e; ++n)
      for (int64_t c = 0; c < C; ++c) acc[c] += f(n, c, x[n * C + c]);
  });
  std::vector<double> r(static_cast<size_t>(C), 0.0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t c = 0; c < C; ++c) r[c] += part[k * C + c];
  return r;
}

template <typename T>
void bn_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& input,
                const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                const BatchNormArgs& a) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  const T* x = cptr<T>(input);
  const T* w = cptr<T>(weight);
  const T* b = cptr<T>(bias);
  T* rm = mptr<T>(running_mean);
  T* rv = mptr<T>(running_var);
  std::vector<double> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C));
  if (a.training) {
    const double M = static_cast<double>(N * S);
    if (S == 1) {
      mean = column_sums(x, N, C, [](int64_t, int64_t, T v) { return static_cast<double>(v); });
      for (auto& m : mean) m /= M;
      var = column_sums(x, N, C, [&](int64_t, int64_t c, T v) {
        const double d = static_cast<double>(v) - mean[c];
        return d * d;
      });
    } else {
      per_channel_double<T>(N, C, S, mean, [&](int64_t c, int64_t n) { return run_total(x + (n * C + c) * S, S); });
      for (auto& m : mean) m /= M;
      per_channel_double<T>(N, C, S, var,
                            [&](int64_t c, int64_t n) { return run_sq_dev(x + (n * C + c) * S, S, mean[c]); });
    }
    for (auto& v : var) v /= M;  // biased: the normalisation's variance
    if (rm) {
      const double m = a.momentum, unbias = M > 1 ? M / (M - 1) : 1.0;
      for (int64_t c = 0; c < C; ++c) {
        rm[c] = static_cast<T>((1 - m) * static_cast<double>(rm[c]) + m * mean[c]);
        rv[c] = static_cast<T>((1 - m) * static_cast<double>(rv[c]) + m * var[c] * unbias);
      }
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mean[c] = static_cast<double>(rm[c]);
      var[c] = static_cast<double>(rv[c]);
    }
  }
  double* sm = mptr<double>(save_mean);
  double* si = mptr<double>(save_invstd);
  std::vector<T> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const double invstd = 1.0 / std::sqrt(var[c] + a.eps);
    sm[c] = mean[c];
    si[c] = invstd;
    scale[c] = static_cast<T>((w ? static_cast<double>(w[c]) : 1.0) * invstd);
    shift[c] = b ? b[c] : T(0);
  }
  normalise_channels(mptr<T>(out), x, mean, scale, shift, N, C, S);
}

template <typename T>
void bn_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                 const Tensor& input, const Tensor& weight, const Tensor& save_mean, const Tensor& save_invstd,
                 bool training) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  const T* x = cptr<T>(input);
  const T* dy = cptr<T>(grad_out);
  const T* w = cptr<T>(weight);
  const double* sm = cptr<double>(save_mean);
  const double* si = cptr<double>(save_invstd);
  // sum(dy) and sum(dy * (x - mean)) per channel
  std::vector<double> sdy(static_cast<size_t>(C)), sdyx(static_cast<size_t>(C));
  if (S == 1) {
    sdy = column_sums(dy, N, C, [](int64_t, int64_t, T v) { return static_cast<double>(v); });
    sdyx = column_sums(dy, N, C, [&](int64_t n, int64_t c, T v) {
      return static_cast<double>(v) * (static_cast<double>(x[n * C + c]) - sm[c]);
    });
  } else {
    per_channel_double<T>(N, C, S, sdy, [&](int64_t c, int64_t n) { return run_total(dy + (n * C + c) * S, S); });
    per_channel_double<T>(N, C, S, sdyx, [&](int64_t c, int64_t n) {
      const T* g = dy + (n * C + c) * S;
      const T* xr = x + (n * C + c) * S;
      const double m = sm[c];
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < S; ++i) s += static_cast<double>(g[i]) * (static_cast<double>(xr[i]) - m);
      return s;
    });
  }
  if (T* gw = mptr<T>(grad_weight))
    for (int64_t c = 0; c < C; ++c) gw[c] = static_cast<T>(sdyx[c] * si[c]);
  if (T* gb = mptr<T>(grad_bias))
    for (int64_t c = 0; c < C; ++c) gb[c] = static_cast<T>(sdy[c]);
  T* gi = mptr<T>(grad_input);
  if (!gi) return;
  // dx = k * (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))), k = w * invstd
  // (training); dx = k * dy (eval). Per channel: dx = dy * a + (x - mean) * b + c.
  const double M = static_cast<double>(N * S);
  std::vector<T> ca(static_cast<size_t>(C)), cb(static_cast<size_t>(C)), cc(static_cast<size_t>(C));
  std::vector<T> head(static_cast<size_t>(C)), tail(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const double inv = si[c], k = (w ? static_cast<double>(w[c]) : 1.0) * inv;
    SplitMean<T> m(sm[c]);
    head[c] = m.head, tail[c] = m.tail;
    ca[c] = static_cast<T>(k), cb[c] = T(0), cc[c] = T(0);
    if (training && M > 0) {
      cb[c] = static_cast<T>(-k * sdyx[c] / M * inv * inv);
      cc[c] = static_cast<T>(-k * sdy[c] / M);
    }
  }
  if (S == 1) {
    parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          gi[n * C + c] = dy[n * C + c] * ca[c] + ((x[n * C + c] - head[c]) - tail[c]) * cb[c] + cc[c];
      }
    });
    return;
  }
  parallel_for(0, N * C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, S)), [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t c = nc % C;
      const T a = ca[c], bb = cb[c], k = cc[c], hd = head[c], tl = tail[c];
      const T* g = dy + nc * S;
      const T* xr = x + nc * S;
      T* o = gi + nc * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) o[i] = g[i] * a + ((xr[i] - hd) - tl) * bb + k;
    }
  });
}

template <typename T>
void ln_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input, const Tensor& weight,
                const Tensor& bias, double eps) {
  const int64_t M = input.size(0), D = input.size(1);
  const T* x = cptr<T>(input);
  const T* w = cptr<T>(weight);
  const T* b = cptr<T>(bias);
  T* y = mptr<T>(out);
  double* mp = mptr<double>(mean);
  double* rp = mptr<double>(rstd);
  parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, D)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      const double m = D > 0 ? run_total(xr, D) / static_cast<double>(D) : 0.0;
      const double v = D > 0 ? run_sq_dev(xr, D, m) / static_cast<double>(D) : 0.0;
      const double rs = 1.0 / std::sqrt(v + eps);
      mp[r] = m;
      rp[r] = rs;
      const SplitMean<T> sm(m);
      const T hd = sm.head, tl = sm.tail, trs = static_cast<T>(rs);
      if (w && b) {
#pragma omp simd
        for (int64_t i = 0; i < D; ++i) yr[i] = ((xr[i] - hd) - tl) * trs * w[i] + b[i];
      } else if (w) {
#pragma omp simd
        for (int64_t i = 0; i < D; ++i) yr[i] = ((xr[i] - hd) - tl) * trs * w[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < D; ++i) yr[i] = ((xr[i] - hd) - tl) * trs + (b ? b[i] : T(0));
      }
    }
  });
}

template <typename T>
void ln_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                 const Tensor& input, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const int64_t M = input.size(0), D = input.size(1);
  const T* x = cptr<T>(input);
  const T* dy = cptr<T>(grad_out);
  const T* w = cptr<T>(weight);
  const double* mp = cptr<double>(mean);
  const double* rp = cptr<double>(rstd);
  T* gi = mptr<T>(grad_input);
  T* gw = mptr<T>(grad_weight);
  T* gb = mptr<T>(grad_bias);
  const int64_t nt = std::max(1, get_num_threads());
  // per-chunk partial sums of dy * xhat and dy over rows
  std::vector<double> pw(gw ? static_cast<size_t>(nt * D) : 0, 0.0), pb(gb ? static_cast<size_t>(nt * D) : 0, 0.0);
  const int64_t chunks = parallel_chunks(
      M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, D)), [&](int64_t tid, int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          const T* xr = x + r * D;
          const T* g = dy + r * D;
          const double m = mp[r], rs = rp[r];
          if (gw) {
            double* acc = pw.data() + tid * D;
#pragma omp simd
            for (int64_t i = 0; i < D; ++i) acc[i] += static_cast<double>(g[i]) * (static_cast<double>(xr[i]) - m) * rs;
          }
          if (gb) {
            double* acc = pb.data() + tid * D;
#pragma omp simd
            for (int64_t i = 0; i < D; ++i) acc[i] += static_cast<double>(g[i]);
          }
          if (!gi) continue;
          // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = dy * w
          const SplitMean<T> sm(m);
          const T hd = sm.head, tl = sm.tail, trs = static_cast<T>(rs);
          double s1 = 0, s2 = 0;
          if (w) {
#pragma omp simd reduction(+ : s1, s2)
            for (int64_t i = 0; i < D; ++i) {
              const T gv = g[i] * w[i];
              s1 += static_cast<double>(gv);
              s2 += static_cast<double>(gv * (((xr[i] - hd) - tl) * trs));
            }
          } else {
#pragma omp simd reduction(+ : s1, s2)
            for (int64_t i = 0; i < D; ++i) {
              s1 += static_cast<double>(g[i]);
              s2 += static_cast<double>(g[i] * (((xr[i] - hd) - tl) * trs));
            }
          }
          const T c1 = static_cast<T>(s1 / static_cast<double>(D)), c2 = static_cast<T>(s2 / static_cast<double>(D));
          T* o = gi + r * D;
          if (w) {
#pragma omp simd
            for (int64_t i = 0; i < D; ++i) o[i] = trs * (g[i] * w[i] - c1 - ((xr[i] - hd) - tl) * trs * c2);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < D; ++i) o[i] = trs * (g[i] - c1 - ((xr[i] - hd) - tl) * trs * c2);
          }
        }
      });
  for (int64_t i = 0; i < D; ++i) {
    if (gw) {
      double s = 0;
      for (int64_t t = 0; t < chunks; ++t) s += pw[t * D + i];
      gw[i] = static_cast<T>(s);
    }
    if (gb) {
      double s = 0;
      for (int64_t t = 0; t < chunks; ++t) s += pb[t * D + i];
      gb[i] = static_cast<T>(s);
    }
  }
}

void cpu_bn_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& input,
                    const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                    const BatchNormArgs& a) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "batch_norm", [&] {
    bn_forward<scalar_t>(out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, a);
  });
}
void cpu_bn_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                     const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
                     const Tensor& save_invstd, bool training) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "batch_norm_backward", [&] {
    bn_backward<scalar_t>(grad_input, grad_weight, grad_bias, grad_out, input, weight, save_mean, save_invstd,
                          training);
  });
}
void cpu_ln_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                    const Tensor& weight, const Tensor& bias, double eps) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "layer_norm",
                       [&] { ln_forward<scalar_t>(out, mean, rstd, input, weight, bias, eps); });
}
void cpu_ln_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                     const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                     const Tensor& rstd) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "layer_norm_backward", [&] {
    ln_backward<scalar_t>(grad_input, grad_weight, grad_bias, grad_out, input, weight, mean, rstd);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(batch_norm_forward_stub, CPU, cpu_bn_forward);
EMBER_REGISTER_KERNEL(batch_norm_backward_stub, CPU, cpu_bn_backward);
EMBER_REGISTER_KERNEL(layer_norm_forward_stub, CPU, cpu_ln_forward);
EMBER_REGISTER_KERNEL(layer_norm_backward_stub, CPU, cpu_ln_backward);

}  // namespace ember
