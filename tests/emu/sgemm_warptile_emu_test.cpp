// The float GEMM's vectorised warp-tiled kernel (core/cuda/sgemm_warptile.h) in every thread order
// and every tile configuration EMBER_GEMM_TILE names, against a float64 product computed here:
// both transposes, sizes that end inside a tile, inside a float4 along K and along the rows (the
// leading dimensions stay multiples of 4, so the kernel is taken, not the scalar fallback), a
// batch with strides, alpha and beta. C starts random, so an element not written (beta 0) fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gemm_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;

namespace {

struct ScopedTile {
  explicit ScopedTile(const char* v) { setenv("EMBER_GEMM_TILE", v, 1); }
  ~ScopedTile() { unsetenv("EMBER_GEMM_TILE"); }
};

struct GemmShape {
  int64_t m, n, k, batch;
};

// Row-major op(X) element (r, c) of a matrix with leading dimension ld, transposed or not.
double at(const std::vector<float>& x, size_t base, bool trans, int64_t ld, int64_t r, int64_t c) {
  return trans ? x[base + c * ld + r] : x[base + r * ld + c];
}

// Runs one batched GEMM through the emulated stub and checks every element of C.
void check(const GemmShape& s, bool ta, bool tb, double alpha, double beta) {
  // Leading dimensions: the extent rounded up to a multiple of 4 (the fast kernel's condition),
  // plus 4 floats the kernel must neither read into its product nor write.
  auto ld = [](int64_t extent) { return (extent + 3) / 4 * 4 + 4; };
  const int64_t lda = ld(ta ? s.m : s.k), ldb = ld(tb ? s.k : s.n), ldc = ld(s.n);
  const int64_t rows_a = ta ? s.k : s.m, rows_b = tb ? s.n : s.k;
  const int64_t sa = rows_a * lda, sb = rows_b * ldb, sc = s.m * ldc;
  const Tensor a = emu_test::device_copy(randn({s.batch * sa})), b = emu_test::device_copy(randn({s.batch * sb}));
  const Tensor c0 = randn({s.batch * sc});
  Tensor c = emu_test::device_copy(c0);
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c0.to_vector<float>();
  GemmArgs g;
  g.trans_a = ta, g.trans_b = tb, g.m = s.m, g.n = s.n, g.k = s.k, g.alpha = alpha, g.beta = beta;
  g.a = a.raw_data(), g.lda = lda, g.b = b.raw_data(), g.ldb = ldb, g.c = c.raw_data(), g.ldc = ldc;
  emu::kernel(gemm_batched_stub)(g, s.batch, sa, sb, sc);
  const std::vector<float> got = c.to_vector<float>();
  int bad = 0;
  for (int64_t z = 0; z < s.batch; ++z)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t o = static_cast<size_t>(z * sc + i * ldc + j);
        double want = cv[o];  // the padding columns stay as they were
        if (j < s.n) {
          double sum = 0;
          for (int64_t q = 0; q < s.k; ++q) sum += at(av, z * sa, ta, lda, i, q) * at(bv, z * sb, tb, ldb, q, j);
          want = alpha * sum + beta * cv[o];
        }
        if (!(std::abs(got[o] - want) <= 1e-4 * (1 + std::abs(want))) && bad++ < 5)  // NaN fails too
          ADD_FAILURE() << "m n k " << s.m << " " << s.n << " " << s.k << " ta " << ta << " tb " << tb << ": C[" << z
                        << "][" << i << "][" << j << "] = " << got[o] << ", want " << want;
      }
  EXPECT_EQ(bad, 0);
}

class SgemmWarptile : public emu_test::EmulatedKernel {};

}  // namespace

TEST_P(SgemmWarptile, EveryTileAndTransposeMatchesFloat64) {
  const std::vector<GemmShape> shapes = {
      {128, 128, 16, 1},  // whole tiles
      {132, 68, 21, 1},   // a partial tile in m and n, K ends inside a float4
      {7, 130, 9, 2},     // rows and columns ending inside a float4, a batch
      {1, 1, 1, 1},
  };
  for (const char* tile : {"128x128x8", "128x64x8", "64x128x8"}) {
    ScopedTile scoped(tile);
    for (const GemmShape& s : shapes)
      for (int t = 0; t < 4; ++t) check(s, t & 1, t & 2, 1.0, 0.0);
  }
  check({40, 36, 8, 1}, false, false, 0.5, 2.0);  // beta reads C
  check({40, 36, 8, 1}, true, true, 0.0, 1.0);    // alpha 0: C scaled only
}

INSTANTIATE_TEST_SUITE_P(Orders, SgemmWarptile, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);

TEST(SgemmWarptileChoice, UnknownTileIsAnError) {
  ScopedTile scoped("96x96x8");
  const Tensor a = emu_test::device_copy(randn({16})), c = emu_test::device_copy(zeros({16}));
  GemmArgs g;
  g.m = g.n = g.k = 4, g.lda = g.ldb = g.ldc = 4;
  g.a = a.raw_data(), g.b = a.raw_data(), g.c = c.raw_data();
  try {
    emu::kernel(gemm_stub)(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EMBER_GEMM_TILE = '96x96x8'"), std::string::npos) << e.what();
  }
}
