#include <cmath>

#include "core/copy.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "core/random.h"

namespace ember {

namespace {

// Uniform [0,1) for element i: float32 uses 24 bits, float64 53 bits.
template <typename T>
inline T uniform_at(uint64_t seed, uint64_t offset, int64_t i) {
  Philox4x32 r = philox_block(seed, offset + static_cast<uint64_t>(i) / 2);
  const int w = 2 * static_cast<int>(i % 2);
  if constexpr (std::is_same_v<T, double>) {
    return uints_to_unit_double(r.v[w], r.v[w + 1]);
  } else {
    return uint_to_unit_float(r.v[w]);
  }
}

template <typename T>
inline T normal_at(uint64_t seed, uint64_t offset, int64_t i) {
  Philox4x32 r = philox_block(seed, offset + static_cast<uint64_t>(i));
  if constexpr (std::is_same_v<T, double>) {
    double u1 = uints_to_unit_double(r.v[0], r.v[1]);
    double u2 = uints_to_unit_double(r.v[2], r.v[3]);
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
  } else {
    float u1 = uint_to_unit_float(r.v[0]);
    float u2 = uint_to_unit_float(r.v[1]);
    return std::sqrt(-2.0f * std::log(1.0f - u1)) * std::cos(6.2831853071795864f * u2);
  }
}

void cpu_random(const Tensor& dst, const RandomParams& p, const Tensor& prob) {
  const int64_t n = dst.numel();
  const uint64_t seed = p.seed, off = p.offset;
  EMBER_DISPATCH_ALL(dst.dtype(), "random", [&] {
    scalar_t* out = static_cast<scalar_t*>(dst.raw_data());
    // Math happens in double for float64 outputs and float otherwise (as on the GPU).
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    switch (p.kind) {
      case RandomKind::Uniform:
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          const acc_t lo = static_cast<acc_t>(p.a), span = static_cast<acc_t>(p.b - p.a);
          for (int64_t i = b; i < e; ++i) out[i] = cast_value<scalar_t>(lo + span * uniform_at<acc_t>(seed, off, i));
        });
        break;
      case RandomKind::Normal:
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          const acc_t mean = static_cast<acc_t>(p.a), sd = static_cast<acc_t>(p.b);
          for (int64_t i = b; i < e; ++i) out[i] = cast_value<scalar_t>(mean + sd * normal_at<acc_t>(seed, off, i));
        });
        break;
      case RandomKind::Bernoulli: {
        const double* pp = prob.defined() ? static_cast<const double*>(prob.raw_data()) : nullptr;
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const double pi = pp ? pp[i] : p.a;
            out[i] = cast_value<scalar_t>(static_cast<double>(uniform_at<acc_t>(seed, off, i)) < pi ? 1.0 : 0.0);
          }
        });
        break;
      }
      case RandomKind::RandInt: {
        const uint64_t range = static_cast<uint64_t>(p.b - p.a);
        const int64_t low = static_cast<int64_t>(p.a);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            Philox4x32 r = philox_block(seed, off + static_cast<uint64_t>(i) / 2);
            const int w = 2 * static_cast<int>(i % 2);
            uint64_t x = (static_cast<uint64_t>(r.v[w]) << 32) | r.v[w + 1];
            out[i] = cast_value<scalar_t>(low + static_cast<int64_t>(x % range));
          }
        });
        break;
      }
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(random_stub, CPU, cpu_random);

}  // namespace ember
