// Math for kernels, overloaded on float and double, spelled with the C library's names so that
// nvcc picks its device functions and the host compiler (the kernel emulator) the host ones:
// kernels call d_exp(x) instead of std::exp, which is not a device function.
#pragma once

#include <math.h>

#include "core/cuda/device_api.h"

namespace ember::cuda {

EMBER_DEVICE float d_exp(float x) {
  return expf(x);
}
EMBER_DEVICE double d_exp(double x) {
  return exp(x);
}
EMBER_DEVICE float d_expm1(float x) {
  return expm1f(x);
}
EMBER_DEVICE double d_expm1(double x) {
  return expm1(x);
}
EMBER_DEVICE float d_log(float x) {
  return logf(x);
}
EMBER_DEVICE double d_log(double x) {
  return log(x);
}
EMBER_DEVICE float d_log1p(float x) {
  return log1pf(x);
}
EMBER_DEVICE double d_log1p(double x) {
  return log1p(x);
}
EMBER_DEVICE float d_sqrt(float x) {
  return sqrtf(x);
}
EMBER_DEVICE double d_sqrt(double x) {
  return sqrt(x);
}
EMBER_DEVICE float d_tanh(float x) {
  return tanhf(x);
}
EMBER_DEVICE double d_tanh(double x) {
  return tanh(x);
}
EMBER_DEVICE float d_erfc(float x) {
  return erfcf(x);
}
EMBER_DEVICE double d_erfc(double x) {
  return erfc(x);
}
EMBER_DEVICE float d_pow(float x, float y) {
  return powf(x, y);
}
EMBER_DEVICE double d_pow(double x, double y) {
  return pow(x, y);
}
EMBER_DEVICE float d_fabs(float x) {
  return fabsf(x);
}
EMBER_DEVICE double d_fabs(double x) {
  return fabs(x);
}
EMBER_DEVICE float d_cos(float x) {
  return cosf(x);
}
EMBER_DEVICE double d_cos(double x) {
  return cos(x);
}
EMBER_DEVICE bool d_isnan(float x) {
  return x != x;
}
EMBER_DEVICE bool d_isnan(double x) {
  return x != x;
}

template <typename T>
EMBER_DEVICE T d_infinity() {
  return static_cast<T>(HUGE_VAL);
}

// std::min/max are not device functions without --expt-relaxed-constexpr.
template <typename T>
EMBER_HOST_DEVICE T dmin(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
EMBER_HOST_DEVICE T dmax(T a, T b) {
  return a < b ? b : a;
}

// max/min that propagate NaN (as the CPU kernels do).
template <typename T>
EMBER_DEVICE T max_nan(T x, T y) {
  return (x > y || x != x) ? x : y;
}
template <typename T>
EMBER_DEVICE T min_nan(T x, T y) {
  return (x < y || x != x) ? x : y;
}

}  // namespace ember::cuda
