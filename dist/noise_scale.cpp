#include "dist/noise_scale.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ember::dist {

NoiseSample noise_sample(double small_sqr, double b, double big_sqr, double B) {
  EMBER_CHECK(b > 0 && B > b && std::isfinite(B), "noise scale: expected batch sizes 0 < b < B, got b = ", b,
              " and B = ", B);
  EMBER_CHECK(std::isfinite(small_sqr) && small_sqr >= 0 && std::isfinite(big_sqr) && big_sqr >= 0,
              "noise scale: expected finite squared gradient norms >= 0, got ", small_sqr, " (batch ", b, ") and ",
              big_sqr, " (batch ", B, ")");
  return {(B * big_sqr - b * small_sqr) / (B - b), (small_sqr - big_sqr) / (1 / b - 1 / B)};
}

NoiseScale::NoiseScale(double decay) : decay_(decay) {
  EMBER_CHECK(decay >= 0 && decay < 1, "noise scale: expected a decay in [0, 1), got ", decay);
}

void NoiseScale::add(const NoiseSample& s) {
  sqr_ = decay_ * sqr_ + (1 - decay_) * s.grad_sqr;
  trace_ = decay_ * trace_ + (1 - decay_) * s.trace;
  weight_ = decay_ * weight_ + (1 - decay_);  // 1 - decay^n: Adam's bias correction
  ++n_;
}

double NoiseScale::grad_sqr() const {
  return n_ ? sqr_ / weight_ : 0.0;
}
double NoiseScale::trace() const {
  return n_ ? trace_ / weight_ : 0.0;
}

std::optional<double> NoiseScale::value() const {
  if (n_ == 0 || grad_sqr() <= 0) return std::nullopt;
  return std::max(0.0, trace()) / grad_sqr();
}

}  // namespace ember::dist
