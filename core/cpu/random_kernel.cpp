#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/copy.h"
#include "core/parallel.h"
#include "core/philox.h"
#include "core/random.h"

namespace ember {

namespace {

// Philox blocks are computed kLanes at a time, one array per word, and each block once for all
// the elements it feeds (a block per element, one word of four used per float32, cost the DCGAN's
// dropout 15% of a training step). The ten rounds run sixteen blocks per instruction with AVX-512
// and eight with AVX2 (GCC 12 does not vectorise the scalar loop: no vpmuludq in its avx512 object). The words are
// those of philox_block (core/philox.h) on every path: the same values as one block per element,
// and as the CUDA kernels (Rng.EachElementIsThePhiloxBlockItNamesAlone runs at every level).
constexpr int kLanes = 16;

struct Lanes {
  uint32_t w[4][kLanes];
};

// Philox's ten rounds on a register of blocks per word. `mul_epu32` multiplies the even 32-bit lanes
// into 64-bit products; the odd lanes go through a shift by 32 first, and blends put the halves
// back. One register holds sixteen blocks with AVX-512 and eight with AVX2.
#if defined(__AVX512F__)
struct Avx512Words {
  using V = __m512i;
  static constexpr int kWidth = 16;
  static V load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void store(uint32_t* p, V v) { _mm512_storeu_si512(p, v); }
  static V set1(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm512_xor_si512(_mm512_xor_si512(a, b), c); }
  // The maskz forms (all lanes kept) because GCC 12's plain ones pass an "undefined" vector that
  // its -Wmaybe-uninitialized reports.
  static void mulhilo(V a, V m, V& hi, V& lo) {
    const V even = _mm512_maskz_mul_epu32(0xFF, a, m);
    const V odd = _mm512_maskz_mul_epu32(0xFF, _mm512_maskz_srli_epi64(0xFF, a, 32), m);
    lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_maskz_slli_epi64(0xFF, odd, 32));
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(0xFF, even, 32), odd);
  }
};
#endif
#if defined(__AVX2__)
struct Avx2Words {
  using V = __m256i;
  static constexpr int kWidth = 8;
  static V load(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  static void store(uint32_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<V*>(p), v); }
  static V set1(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V xor3(V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }
  static void mulhilo(V a, V m, V& hi, V& lo) {
    const V even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  }
};
#endif

template <class W>
inline void philox_rounds(const uint32_t* c0, const uint32_t* c1, const uint32_t* c2, const uint32_t* c3, uint32_t k0,
                          uint32_t k1, Lanes& out) {
  using V = typename W::V;
  const V m0 = W::set1(kPhiloxM0), m1 = W::set1(kPhiloxM1);
  for (int g = 0; g < kLanes; g += W::kWidth) {
    V x0 = W::load(c0 + g), x1 = W::load(c1 + g), x2 = W::load(c2 + g), x3 = W::load(c3 + g);
    uint32_t r0 = k0, r1 = k1;
    for (int r = 0; r < 10; ++r) {
      V hi0, lo0, hi1, lo1;
      W::mulhilo(x0, m0, hi0, lo0);
      W::mulhilo(x2, m1, hi1, lo1);
      x0 = W::xor3(hi1, x1, W::set1(r0));
      x1 = lo1;
      x2 = W::xor3(hi0, x3, W::set1(r1));
      x3 = lo0;
      r0 += kPhiloxW0;
      r1 += kPhiloxW1;
    }
    W::store(out.w[0] + g, x0);
    W::store(out.w[1] + g, x1);
    W::store(out.w[2] + g, x2);
    W::store(out.w[3] + g, x3);
  }
}

// Blocks first .. first + kLanes - 1 of the stream of `seed`.
inline void philox_lanes(uint64_t seed, uint64_t first, Lanes& out) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t block = first + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(block);
    c1[l] = static_cast<uint32_t>(block >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#if defined(__AVX512F__)
  philox_rounds<Avx512Words>(c0, c1, c2, c3, k0, k1, out);
#elif defined(__AVX2__)
  philox_rounds<Avx2Words>(c0, c1, c2, c3, k0, k1, out);
#else
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < kLanes; ++l) philox_round(c0[l], c1[l], c2[l], c3[l], k0, k1);
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out.w[0][l] = c0[l];
    out.w[1][l] = c1[l];
    out.w[2][l] = c2[l];
    out.w[3][l] = c3[l];
  }
#endif
}

// Calls f(i, words, lane, first word) for each element i in [b, e), where element i takes block
// off + i / PerBlock of the stream and its words from (i % PerBlock) * (4 / PerBlock). Elements are
// walked block by block, so nothing is divided per element (an integer division per element cost
// more than the Philox rounds themselves), and only the first and last group of blocks check the
// range.
template <int PerBlock, class F>
void for_each_element(uint64_t seed, uint64_t off, int64_t b, int64_t e, F&& f) {
  if (b >= e) return;
  constexpr int kStride = 4 / PerBlock;
  Lanes lanes;
  const int64_t first = b / PerBlock, last = (e - 1) / PerBlock;  // blocks, inclusive
  for (int64_t j = first; j <= last; j += kLanes) {
    philox_lanes(seed, off + static_cast<uint64_t>(j), lanes);
    const int64_t i0 = j * PerBlock;
    if (i0 >= b && i0 + kLanes * PerBlock <= e) {
      for (int l = 0; l < kLanes; ++l)
        for (int k = 0; k < PerBlock; ++k) f(i0 + l * PerBlock + k, lanes, l, k * kStride);
    } else {
      for (int l = 0; l < kLanes; ++l)
        for (int k = 0; k < PerBlock; ++k) {
          const int64_t i = i0 + l * PerBlock + k;
          if (i >= b && i < e) f(i, lanes, l, k * kStride);
        }
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
    // A block that straddles two threads' ranges is computed by both: the same words. The
    // per-element functions capture by value: through a reference, every uint8 store (which may
    // alias anything) made the compiler reload `out` and the parameters, twice per element.
    switch (p.kind) {
      case RandomKind::Uniform: {
        const acc_t lo = static_cast<acc_t>(p.a), span = static_cast<acc_t>(p.b - p.a);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element<2>(seed, off, b, e, [out, lo, span](int64_t i, const Lanes& x, int l, int w) {
            out[i] = cast_value<scalar_t>(lo + span * unit<acc_t>(x, l, w));
          });
        });
        break;
      }
      case RandomKind::Normal: {
        const acc_t mean = static_cast<acc_t>(p.a), sd = static_cast<acc_t>(p.b);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element<1>(seed, off, b, e, [out, mean, sd](int64_t i, const Lanes& x, int l, int) {
            out[i] = cast_value<scalar_t>(mean + sd * normal<acc_t>(x, l));
          });
        });
        break;
      }
      case RandomKind::Bernoulli: {
        const double* pp = prob.defined() ? static_cast<const double*>(prob.raw_data()) : nullptr;
        const double pa = p.a;
        // Two loops on purpose: one generic loop taking the probability through a function object
        // ran the DCGAN's 1-thread step 7% slower (4 alternating A/B rounds).
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          if (pp)
            for_each_element<2>(seed, off, b, e, [out, pp](int64_t i, const Lanes& x, int l, int w) {
              out[i] = cast_value<scalar_t>(static_cast<double>(unit<acc_t>(x, l, w)) < pp[i] ? 1.0 : 0.0);
            });
          else
            for_each_element<2>(seed, off, b, e, [out, pa](int64_t i, const Lanes& x, int l, int w) {
              out[i] = cast_value<scalar_t>(static_cast<double>(unit<acc_t>(x, l, w)) < pa ? 1.0 : 0.0);
            });
        });
        break;
      }
      case RandomKind::RandInt: {
        const uint64_t range = static_cast<uint64_t>(p.b - p.a);
        const int64_t low = static_cast<int64_t>(p.a);
        parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
          for_each_element<2>(seed, off, b, e, [out, low, range](int64_t i, const Lanes& x, int l, int w) {
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
