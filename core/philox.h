// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The same (key, counter) gives the same four 32-bit words on the CPU
// and in a CUDA kernel, which is what makes Ember's random streams device-independent. Header
// only and free of host-only code so that CUDA kernels include it too.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__ __forceinline__
#else
#define EMBER_HD inline
#endif

namespace ember {

struct Philox4x32 {
  uint32_t v[4];
};

EMBER_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// The multipliers and the key's increments per round.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

// One round on the counter (c0..c3) with the round's key (k0, k1), in place.
EMBER_HD void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  uint32_t hi0, lo0, hi1, lo1;
  philox_mulhilo(kPhiloxM0, c0, hi0, lo0);
  philox_mulhilo(kPhiloxM1, c2, hi1, lo1);
  const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
  c0 = n0;
  c1 = lo1;
  c2 = n2;
  c3 = lo0;
}

// counter: 128 bits as four words; key: the seed's two words.
EMBER_HD Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    philox_round(c0, c1, c2, c3, k0, k1);
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return {{c0, c1, c2, c3}};
}

// The block of four words for block number `block` of stream (seed, subsequence).
EMBER_HD Philox4x32 philox_block(uint64_t seed, uint64_t block) {
  return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u,
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// 24 random bits -> float in [0, 1); 53 bits (two words) -> double in [0, 1).
EMBER_HD float uint_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
EMBER_HD double uints_to_unit_double(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 21) ^ static_cast<uint64_t>(b >> 11);
  return static_cast<double>(x & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace ember
