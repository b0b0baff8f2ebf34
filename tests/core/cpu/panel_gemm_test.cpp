// The packed-panel GEMM of core/cpu/panel_gemm.h, compiled once per CPU capability level (at avx2
// its AVX2/FMA kernel on 16-column panels, at avx512 its AVX-512 one on 32-column panels, at
// baseline the portable one), against a double-precision product: every register block height
// (1-12 rows and remainders past them), every panel width (N not a multiple of 16 or 32, partial
// panels narrower and wider than one vector), K across the 256-deep blocks, A read by rows and by
// columns, and accumulation into C. float and double.
#include "core/cpu/panel_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu_level_test.h"

using namespace ember;

namespace {

EMBER_CPU_LEVEL_FIXTURE(PanelGemm);

namespace panel = cpu::panel;

template <typename T>
struct Aligned {  // 64-byte aligned storage, as the packed operand must be
  explicit Aligned(int64_t n) : v(static_cast<size_t>(n + 16)) {
    auto p = reinterpret_cast<uintptr_t>(v.data());
    data = reinterpret_cast<T*>((p + 63) & ~uintptr_t{63});
  }
  std::vector<T> v;
  T* data;
};

template <typename T, panel::ALayout L>
void check(int64_t M, int64_t N, int64_t K, bool accumulate, std::mt19937& rng) {
  // Uniform in [-1, 1) from the generator's 32-bit values: std::uniform_real_distribution would
  // instantiate std::generate_canonical in the avx2 and avx512 copies of this file alone
  // (compiler.cpu_dispatch_symbols).
  auto u = [](std::mt19937& r) { return static_cast<double>(r()) / 2147483648.0 - 1.0; };
  const int64_t lda = (L == panel::ALayout::kRows ? K : M) + 3;  // leading dimensions wider than the operand
  const int64_t ldb = N + 5, ldc = N + 2;
  const int64_t a_rows = L == panel::ALayout::kRows ? M : K;
  std::vector<T> a(static_cast<size_t>(a_rows * lda)), b(static_cast<size_t>(K * ldb)), c(static_cast<size_t>(M * ldc));
  for (T& x : a) x = static_cast<T>(u(rng));
  for (T& x : b) x = static_cast<T>(u(rng));
  for (T& x : c) x = static_cast<T>(u(rng));
  const std::vector<T> c0 = c;
  Aligned<T> packed(panel::packed_size(K, N));
  panel::pack(K, N, packed.data, [&](int64_t k, int64_t n) { return b[k * ldb + n]; });
  panel::gemm_packed<L>(M, N, K, a.data(), lda, packed.data, c.data(), ldc, accumulate);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = c[i * ldc + j];
      if (j >= N) {  // past the product's columns: untouched
        ASSERT_EQ(got, c0[i * ldc + j]) << "column " << j << " of " << N << ", row " << i;
        continue;
      }
      double want = accumulate ? static_cast<double>(c0[i * ldc + j]) : 0.0, scale = std::fabs(want);
      for (int64_t k = 0; k < K; ++k) {
        const double av = L == panel::ALayout::kRows ? a[i * lda + k] : a[k * lda + i];
        want += av * static_cast<double>(b[k * ldb + j]);
        scale += std::fabs(av * static_cast<double>(b[k * ldb + j]));
      }
      const double eps = std::is_same_v<T, float> ? 1.2e-7 : 2.3e-16;
      ASSERT_NEAR(static_cast<double>(got), want, 2.0 * static_cast<double>(K + 1) * eps * scale + 1e-30)
          << "M " << M << " N " << N << " K " << K << (accumulate ? " accumulating" : "") << " at (" << i << ", " << j
          << ")" << (L == panel::ALayout::kRows ? "" : ", A by columns");
    }
  }
}

template <typename T, panel::ALayout L>
void sweep() {
  std::mt19937 rng(77);
  for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 25, 37})
    for (int64_t N : {1, 15, 16, 17, 31, 32, 33, 40, 70})
      for (int64_t K : {1, 7, 256, 300})
        for (bool accumulate : {false, true}) check<T, L>(M, N, K, accumulate, rng);
  // Rows in more than one block of gemm_packed (kBlockABytes of A), K in three 256-deep blocks.
  check<T, L>(2000, 20, 600, true, rng);
}

EMBER_CPU_LEVEL_TEST(PanelGemm, FloatRowsMatchesDoubleProduct) {
  sweep<float, panel::ALayout::kRows>();
}
EMBER_CPU_LEVEL_TEST(PanelGemm, FloatColumnsMatchesDoubleProduct) {
  sweep<float, panel::ALayout::kColumns>();
}
EMBER_CPU_LEVEL_TEST(PanelGemm, DoubleRowsMatchesDoubleProduct) {
  sweep<double, panel::ALayout::kRows>();
}
EMBER_CPU_LEVEL_TEST(PanelGemm, DoubleColumnsMatchesDoubleProduct) {
  sweep<double, panel::ALayout::kColumns>();
}

// pack() lays panels out one after another, zero past N: the layout gemm_panel reads.
EMBER_CPU_LEVEL_TEST(PanelGemm, PackZeroPadsThePartialPanel) {
  const int64_t K = 3, N = panel::kPanel + 4;
  std::vector<float> b(static_cast<size_t>(K * N));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i + 1);
  Aligned<float> p(panel::packed_size(K, N));
  ASSERT_EQ(panel::packed_size(K, N), 2 * K * panel::kPanel);
  panel::pack(K, N, p.data, [&](int64_t k, int64_t n) { return b[k * N + n]; });
  for (int64_t q = 0; q < 2; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < panel::kPanel; ++j) {
        const int64_t col = q * panel::kPanel + j;
        EXPECT_EQ(p.data[(q * K + k) * panel::kPanel + j], col < N ? b[k * N + col] : 0.0f)
            << q << " " << k << " " << j;
      }
}

}  // namespace
