// CPU softmax-cross-entropy, forward and backward, over logits [N, C, S]. With S == 1 (the
// usual [N, C] case) each sample's classes are a contiguous row; otherwise a sample's classes are
// S apart, so the loops run over classes outside and the S positions inside, which keeps the
// inner loops contiguous. logsumexp is accumulated in double.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/vec_math.h"
#include "core/nn_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

// logsumexp over C contiguous floats: the vectorised exp_f32 instead of a double std::exp per
// logit, which dominated a language model's 10,000-way loss. The sum is still kept in double.
double lse_contiguous_f32(const float* x, int64_t C) {
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t c = 0; c < C; ++c) {
    m = x[c] > m ? x[c] : m;
    nan |= x[c] != x[c];
  }
  if (nan) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(m)) return m;  // all -inf (or +inf present): the sum below would be NaN
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c) s += static_cast<double>(cpu::exp_f32(x[c] - m));
  return static_cast<double>(m) + std::log(s);
}

// logsumexp over C values at stride `st`.
template <typename T>
double lse_of(const T* x, int64_t C, int64_t st) {
  if constexpr (std::is_same_v<T, float>) {
    if (st == 1) return lse_contiguous_f32(x, C);
  }
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x[c * st]));
  if (std::isinf(m)) return m;  // all -inf (or +inf present): the sum below would be NaN
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(x[c * st]) - m);
  return m + std::log(s);
}

template <typename T>
void ce_forward(const Tensor& loss, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                const Tensor& target, const Tensor& weight, const CrossEntropyArgs& a) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.size(2);
  const T* x = static_cast<const T*>(logits.raw_data());
  const T* w = weight.defined() ? static_cast<const T*>(weight.raw_data()) : nullptr;
  T* lp = static_cast<T*>(loss.raw_data());
  T* lsep = static_cast<T*>(lse.raw_data());
  double wsum = 0;  // sum of class weights (label smoothing's uniform part)
  for (int64_t c = 0; c < C; ++c) wsum += w ? static_cast<double>(w[c]) : 1.0;
  const double ls = a.label_smoothing;
  const int64_t samples = N * S;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C));

  if (a.prob_target) {
    const T* t = static_cast<const T*>(target.raw_data());
    parallel_for(0, samples, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = i / S, s = i % S;
        const T* xi = x + n * C * S + s;
        const T* ti = t + n * C * S + s;
        const double l = lse_of(xi, C, S);
        double acc = 0;
        for (int64_t c = 0; c < C; ++c) {
          const double tc = static_cast<double>(ti[c * S]);
          if (tc != 0) acc -= (w ? static_cast<double>(w[c]) : 1.0) * tc * (static_cast<double>(xi[c * S]) - l);
        }
        lp[i] = static_cast<T>(acc);
        lsep[i] = static_cast<T>(l);
      }
    });
    return;
  }

  const int64_t* t = static_cast<const int64_t*>(target.raw_data());
  std::atomic<int64_t> bad_index{-1};
  std::vector<double> tw_part(static_cast<size_t>(std::max(1, get_num_threads())), 0.0);
  const int64_t chunks = static_cast<int64_t>(tw_part.size());
  const int64_t per = (samples + chunks - 1) / chunks;
  parallel_for(0, chunks, samples >= grain ? 1 : chunks + 1, [&](int64_t cb, int64_t ce) {
    for (int64_t k = cb; k < ce; ++k) {
      double tw = 0;
      for (int64_t i = k * per; i < std::min(samples, (k + 1) * per); ++i) {
        const int64_t n = i / S, s = i % S;
        const int64_t ti = t[i];
        if (ti == a.ignore_index) {
          lp[i] = T(0);
          lsep[i] = T(0);
          continue;
        }
        if (ti < 0 || ti >= C) {
          int64_t expected = -1;
          bad_index.compare_exchange_strong(expected, i);
          continue;
        }
        const T* xi = x + n * C * S + s;
        const double l = lse_of(xi, C, S);
        const double wt = w ? static_cast<double>(w[ti]) : 1.0;
        double v = -wt * (static_cast<double>(xi[ti * S]) - l);
        if (ls > 0) {
          double smooth = 0;  // sum_c w_c * -logp_c
          for (int64_t c = 0; c < C; ++c)
            smooth -= (w ? static_cast<double>(w[c]) : 1.0) * (static_cast<double>(xi[c * S]) - l);
          v = (1 - ls) * v + ls / static_cast<double>(C) * smooth;
        }
        lp[i] = static_cast<T>(v);
        lsep[i] = static_cast<T>(l);
        tw += wt;
      }
      tw_part[k] = tw;
    }
  });
  const int64_t bi = bad_index.load();
  EMBER_CHECK(bi < 0, "cross_entropy: target ", t[bi < 0 ? 0 : bi], " is out of range for ", C,
              " classes (expected 0 <= target < ", C, " or ignore_index ", a.ignore_index, ")");
  double tw = 0;
  for (double p : tw_part) tw += p;
  *static_cast<T*>(total_weight.raw_data()) = static_cast<T>(tw);
}

template <typename T>
void ce_backward(const Tensor& grad_logits, const Tensor& grad_target, const Tensor& grad_loss, const Tensor& divisor,
                 const Tensor& logits, const Tensor& lse, const Tensor& target, const Tensor& weight,
                 const CrossEntropyArgs& a) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.size(2);
  const T* x = static_cast<const T*>(logits.raw_data());
  const T* lsep = static_cast<const T*>(lse.raw_data());
  const T* w = weight.defined() ? static_cast<const T*>(weight.raw_data()) : nullptr;
  const T* gl = static_cast<const T*>(grad_loss.raw_data());
  const int64_t gs0 = grad_loss.stride(0), gs1 = grad_loss.stride(1);
  const double inv_div =
      divisor.defined() ? 1.0 / static_cast<double>(*static_cast<const T*>(divisor.raw_data())) : 1.0;
  T* gx = grad_logits.defined() ? static_cast<T*>(grad_logits.raw_data()) : nullptr;
  T* gt = grad_target.defined() ? static_cast<T*>(grad_target.raw_data()) : nullptr;
  double wsum = 0;
  for (int64_t c = 0; c < C; ++c) wsum += w ? static_cast<double>(w[c]) : 1.0;
  const double ls = a.label_smoothing;
  const int64_t samples = N * S;
  parallel_for(0, samples, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = i / S, s = i % S;
      const int64_t base = n * C * S + s;
      const T* xi = x + base;
      const double g = static_cast<double>(gl[n * gs0 + s * gs1]) * inv_div;
      const double l = static_cast<double>(lsep[i]);
      if (a.prob_target) {
        const T* ti = static_cast<const T*>(target.raw_data()) + base;
        double tw = 0;  // sum_c w_c t_c
        for (int64_t c = 0; c < C; ++c) tw += (w ? static_cast<double>(w[c]) : 1.0) * static_cast<double>(ti[c * S]);
        for (int64_t c = 0; c < C; ++c) {
          const double wc = w ? static_cast<double>(w[c]) : 1.0;
          const double logp = static_cast<double>(xi[c * S]) - l;
          if (gx) gx[base + c * S] = static_cast<T>(g * (tw * std::exp(logp) - wc * static_cast<double>(ti[c * S])));
          if (gt) gt[base + c * S] = static_cast<T>(-g * wc * logp);
        }
        continue;
      }
      const int64_t ti = static_cast<const int64_t*>(target.raw_data())[i];
      if (ti == a.ignore_index) {
        for (int64_t c = 0; c < C; ++c) gx[base + c * S] = T(0);
        continue;
      }
      const double wt = w ? static_cast<double>(w[ti]) : 1.0;
      const double a1 = g * (1 - ls) * wt, a2 = g * ls / static_cast<double>(C);
      if constexpr (std::is_same_v<T, float>) {
        // The common case (float, [N, C], no class weights or smoothing): one vectorised pass.
        if (S == 1 && !w && ls == 0) {
          const float fa1 = static_cast<float>(a1), fl = static_cast<float>(l);
          float* gi = gx + base;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) gi[c] = fa1 * cpu::exp_f32(xi[c] - fl);
          gi[ti] -= fa1;
          continue;
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        const double p = std::exp(static_cast<double>(xi[c * S]) - l);
        const double wc = w ? static_cast<double>(w[c]) : 1.0;
        double v = a1 * (p - (c == ti ? 1.0 : 0.0));
        if (ls > 0) v += a2 * (wsum * p - wc);
        gx[base + c * S] = static_cast<T>(v);
      }
    }
  });
}

void cpu_ce_forward(const Tensor& loss, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                    const Tensor& target, const Tensor& weight, const CrossEntropyArgs& a) {
  EMBER_DISPATCH_FLOAT(logits.dtype(), "cross_entropy",
                       [&] { ce_forward<scalar_t>(loss, lse, total_weight, logits, target, weight, a); });
}
void cpu_ce_backward(const Tensor& grad_logits, const Tensor& grad_target, const Tensor& grad_loss,
                     const Tensor& divisor, const Tensor& logits, const Tensor& lse, const Tensor& target,
                     const Tensor& weight, const CrossEntropyArgs& a) {
  EMBER_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", [&] {
    ce_backward<scalar_t>(grad_logits, grad_target, grad_loss, divisor, logits, lse, target, weight, a);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(cross_entropy_forward_stub, CPU, cpu_ce_forward);
EMBER_REGISTER_KERNEL(cross_entropy_backward_stub, CPU, cpu_ce_backward);

}  // namespace ember
