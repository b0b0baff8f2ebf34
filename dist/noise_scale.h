// The gradient noise scale of a data-parallel job, measured from what its ranks already exchange
// (McCandlish et al., "An Empirical Model of Large-Batch Training", 2018, appendix A.1; Pollux,
// OSDI 2021, uses the same statistics). Each step gives two estimates of the gradient's squared norm
// at two batch sizes: every rank's own gradient, over its share b (|g_small|^2, averaged over the
// ranks), and the all-reduced mean, over the global batch B (|g_big|^2). Since
// E|g_b|^2 = |G|^2 + tr(Sigma) / b for a batch of b samples,
//
//   |G|^2    ~ (B |g_big|^2 - b |g_small|^2) / (B - b)
//   tr(Sigma) ~ (|g_small|^2 - |g_big|^2) / (1 / b - 1 / B)
//
// are unbiased; each is smoothed by its own exponential moving average (bias-corrected, as Adam's
// moments), and the noise scale is their ratio B_noise = tr(Sigma) / |G|^2: the batch at which a
// step's progress is half of what a noise-free gradient would make. Single-step estimates are very
// noisy and often negative; only the averages are divided. One rank (B == b) gives no estimate.
#pragma once

#include <optional>

namespace ember::dist {

// One step's estimates of |G|^2 and tr(Sigma) from the squared norms at batch sizes b < B.
struct NoiseSample {
  double grad_sqr = 0;  // |G|^2
  double trace = 0;     // tr(Sigma): the per-sample gradient variance, summed over parameters
};
// An ember::Error unless 0 < b < B and both norms are finite and >= 0.
NoiseSample noise_sample(double small_sqr, double b, double big_sqr, double B);

class NoiseScale {
 public:
  // `decay` in [0, 1): the weight of the past in each moving average.
  explicit NoiseScale(double decay = 0.95);
  void add(const NoiseSample& s);
  // tr(Sigma) / |G|^2 from the averages; nullopt before any sample or while the averaged |G|^2 is
  // not positive (the noise then swamps the signal: no finite estimate).
  std::optional<double> value() const;
  // The bias-corrected averages (for the job's reports and the tests).
  double grad_sqr() const;
  double trace() const;
  long long samples() const { return n_; }

 private:
  double decay_, sqr_ = 0, trace_ = 0, weight_ = 0;
  long long n_ = 0;
};

}  // namespace ember::dist
