#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/copy.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "core/random.h"

namespace ember {

namespace {

// Philox blocks are computed kLanes at a time, one array per word, and each block once for all
// the elements it feeds (a block per element, one word of four used per float32, cost the DCGAN's
// dropout 15% of a training step). The layout lets a compiler vectorise the ten rounds across
// blocks; GCC 12 does not (no vpmuludq in the avx512 object), so today the gain is the halved
// block count. The words are those of philox_block (core/philox.h): the same values as one block
// per element, and as the CUDA kernels (Rng.EachElementIsThePhiloxBlockItNamesAlone).
constexpr int kLanes = 16;

struct Lanes {
  uint32_t w[4][kLanes];
};

// Blocks first .. first + kLanes - 1 of the stream of `seed`.
inline void philox_lanes(uint64_t seed, uint64_t first, Lanes& out) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t block = first + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(block);
    c1[l] = static_cast<uint32_t>(block >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(M0) * c0[l], p1 = static_cast<uint64_t>(M1) * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0, n1 = static_cast<uint32_t>(p1);
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1, n3 = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c1[l] = n1;
      c2[l] = n2;
      c3[l] = n3;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out.w[0][l] = c0[l];
    out.w[1][l] = c1[l];
    out.w[2][l] = c2[l];
    out.w[3][l] = c3[l];
  }
}

// Calls f(i, words, first word) for each element i in [b, e), where element i takes block
// off + i / per_block of the stream and its words from (i % per_block) * (4 / per_block).
template <class F>
void for_each_element(uint64_t seed, uint64_t off, int per_block, int64_t b, int64_t e, F&& f) {
  if (b >= e) return;
  Lanes lanes;
  const int64_t first = b / per_block, last = (e - 1) / per_block;  // blocks, inclusive
  const int stride = 4 / per_block;
  for (int64_t j = first; j <= last; j += kLanes) {
    philox_lanes(seed, off + static_cast<uint64_t>(j), lanes);
    const int64_t lo = std::max(b, j * per_block), hi = std::min(e, (j + kLanes) * per_block);
    for (int64_t i = lo; i < hi; ++i) {
      const int l = static_cast<int>(i / per_block - j);
      f(i, lanes, l, static_cast<int>(i % per_block) * stride);
    }
  }
}

// [0, 1) from a block's words at `w`: float32 from 24 bits of one word, float64 from 53 bits of two.
template <typename T>
inline T unit(const Lanes& x, int l, int w) {
  if constexpr (std::is_same_v<T, double>) {
    return uints_to_unit_double(x.w[w][l], x.w[w + 1][l]);
  } else {
    return uint_to_unit_float(x.w[w][l]);
  }
}

// Box-Muller from the block's first two (float) or four (double) words.
template <typename T>
inline T normal(const Lanes& x, int l) {
  if constexpr (std::is_same_v<T, double>) {
    const double u1 = uints_to_unit_double(x.w[0][l], x.w[1][l]), u2 = uints_to_unit_double(x.w[2][l], x.w[3][l]);
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
  } else {
    const float u1 = uint_to_unit_float(x.w[0][l]), u2 = uint_to_unit_float(x.w[1][l]);
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
    // A block that straddles two threads' ranges is computed by both: the same words.
    switch (p.kind) {
      case RandomKind::Uniform: {
        const acc_t lo = static_cast<acc_t>(p.a), span = static_cast<acc_t>(p.b - p.a);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element(seed, off, 2, b, e, [&](int64_t i, const Lanes& x, int l, int w) {
            out[i] = cast_value<scalar_t>(lo + span * unit<acc_t>(x, l, w));
          });
        });
        break;
      }
      case RandomKind::Normal: {
        const acc_t mean = static_cast<acc_t>(p.a), sd = static_cast<acc_t>(p.b);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element(seed, off, 1, b, e, [&](int64_t i, const Lanes& x, int l, int) {
            out[i] = cast_value<scalar_t>(mean + sd * normal<acc_t>(x, l));
          });
        });
        break;
      }
      case RandomKind::Bernoulli: {
        const double* pp = prob.defined() ? static_cast<const double*>(prob.raw_data()) : nullptr;
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element(seed, off, 2, b, e, [&](int64_t i, const Lanes& x, int l, int w) {
            const double pi = pp ? pp[i] : p.a;
            out[i] = cast_value<scalar_t>(static_cast<double>(unit<acc_t>(x, l, w)) < pi ? 1.0 : 0.0);
          });
        });
        break;
      }
      case RandomKind::RandInt: {
        const uint64_t range = static_cast<uint64_t>(p.b - p.a);
        const int64_t low = static_cast<int64_t>(p.a);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element(seed, off, 2, b, e, [&](int64_t i, const Lanes& x, int l, int w) {
            const uint64_t v = (static_cast<uint64_t>(x.w[w][l]) << 32) | x.w[w + 1][l];
            out[i] = cast_value<scalar_t>(low + static_cast<int64_t>(v % range));
          });
        });
        break;
      }
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(random_stub, CPU, cpu_random);

}  // namespace ember
