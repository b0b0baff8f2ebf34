// Index and launch-geometry helpers of the CUDA kernels, checked with sizes no CI machine could
// allocate (the kernels themselves run on such sizes only on a GPU: tests/gpu/gpu_ops_test.cpp):
//  - core/cuda/plane_index.h, the 64-bit in-plane arithmetic of the pooling kernels, on planes of
//    2^31 elements and more, where the former int32 products (OH * OW, ih * W + iw) wrapped;
//  - core/cuda/gemm_geometry.h, which puts the larger GEMM tile count on grid x (2^31 - 1 blocks)
//    rather than always M on grid y (65535), and says which shapes the native kernel cannot run
//    (the CUDA chooser sends those to cuBLAS).
// They stay here, not in the op table: they are host arithmetic of launch geometry, checked at
// sizes no backend could run.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/cuda/gemm_geometry.h"
#include "core/cuda/plane_index.h"

using namespace ember::cuda;

namespace {
constexpr int64_t k2p31 = int64_t{1} << 31;
}  // namespace

TEST(PlaneIndex, SplitsEveryElementOfSmallPlanesLikeTheNaiveLoops) {
  for (int rows : {1, 3, 7})
    for (int cols : {1, 5, 32}) {
      int64_t e = 0;
      for (int64_t p = 0; p < 3; ++p)
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < cols; ++c, ++e) {
            const PlanePos q = split_plane_index(e, rows, cols);
            ASSERT_EQ(q.plane, p);
            ASSERT_EQ(q.row, r);
            ASSERT_EQ(q.col, c);
            ASSERT_EQ(q.offset, plane_offset(r, c, cols));
            ASSERT_EQ(q.offset, static_cast<int64_t>(r) * cols + c);
          }
    }
}

TEST(PlaneIndex, PlanesOfTwoToThe31ElementsAndMoreDoNotWrap) {
  // 46341^2 = 2147488281 > 2^31: the smallest square plane past int32, as the GPU test uses.
  const int n = 46341;
  EXPECT_GT(plane_area(n, n), k2p31);
  EXPECT_EQ(plane_area(n, n), int64_t{2147488281});
  // The last element of the third plane.
  const int64_t area = plane_area(n, n);
  const int64_t e = 3 * area + area - 1;
  const PlanePos last = split_plane_index(e, n, n);
  EXPECT_EQ(last.plane, 3);
  EXPECT_EQ(last.row, n - 1);
  EXPECT_EQ(last.col, n - 1);
  EXPECT_EQ(last.offset, area - 1);
  EXPECT_EQ(plane_offset(n - 1, n - 1, n), area - 1);

  // A wide plane: rows of 2^30 - 1 columns (the kernels' bound on one size), the element just past
  // 2^31 within plane 0 and one in plane 5.
  const int rows = 4, cols = (1 << 30) - 1;
  const PlanePos q = split_plane_index(k2p31 + 7, rows, cols);
  EXPECT_EQ(q.plane, 0);
  EXPECT_EQ(q.row, 2);
  EXPECT_EQ(q.col, 9);  // 2^31 + 7 = 2 * (2^30 - 1) + 9
  EXPECT_EQ(plane_offset(q.row, q.col, cols), k2p31 + 7);
  const int64_t far = 5 * plane_area(rows, cols) + 3 * static_cast<int64_t>(cols) + 11;
  const PlanePos r = split_plane_index(far, rows, cols);
  EXPECT_EQ(r.plane, 5);
  EXPECT_EQ(r.row, 3);
  EXPECT_EQ(r.col, 11);
  EXPECT_EQ(r.offset, 3 * static_cast<int64_t>(cols) + 11);
}

TEST(GemmGeometry, TheLargerTileCountGoesOnGridX) {
  // Ties and wide outputs keep the former mapping: N tiles on x, M tiles on y.
  GemmGrid g = gemm_grid(300, 300, 1, 128, 128);
  EXPECT_FALSE(g.m_on_x);
  EXPECT_EQ(g.x, 3);
  EXPECT_EQ(g.y, 3);
  g = gemm_grid(100, 1000, 7, 128, 128);
  EXPECT_FALSE(g.m_on_x);
  EXPECT_EQ(g.x, 8);
  EXPECT_EQ(g.y, 1);
  EXPECT_EQ(g.z, 7);
  // Tall outputs: M tiles on x.
  g = gemm_grid(1000, 100, 1, 128, 128);
  EXPECT_TRUE(g.m_on_x);
  EXPECT_EQ(g.x, 8);
  EXPECT_EQ(g.y, 1);
  EXPECT_TRUE(g.fits);
}

TEST(GemmGeometry, MoreThan65535RowTilesFitOnGridX) {
  // M = 65535 * 128 + 1 rows needs 65536 row tiles: more than grid y allows, which the former
  // mapping refused.
  const int64_t m = 65535 * 128 + 1;
  GemmGrid g = gemm_grid(m, 64, 1, 128, 128);
  EXPECT_TRUE(g.m_on_x);
  EXPECT_EQ(g.x, 65536);
  EXPECT_EQ(g.y, 1);
  EXPECT_TRUE(g.fits);
  // The largest M the native kernel takes, in the smallest (double, tf32) tiles.
  g = gemm_grid(kGemmDimLimit - 1, 3, 1, 64, 64);
  EXPECT_TRUE(g.fits);
  EXPECT_LE(g.x, kGridXMax);
  // Batches beyond grid z are looped over by the kernel.
  EXPECT_EQ(gemm_grid(5, 5, 100000, 64, 64).z, kGridYZMax);
  EXPECT_EQ(gemm_grid(5, 5, 0, 64, 64).z, 1);
}

TEST(GemmGeometry, ShapesTheNativeKernelCannotRunAreNamed) {
  EXPECT_TRUE(native_gemm_fits(65535 * 128 + 1, 64, 32, 1));
  EXPECT_TRUE(native_gemm_fits(0, 0, 0, 1));
  // Both tile counts beyond grid y: no mapping fits (such a C would hold 2^47 elements).
  EXPECT_FALSE(native_gemm_fits(int64_t{1} << 23, int64_t{1} << 23, 1, 1));
  EXPECT_FALSE(gemm_grid(int64_t{1} << 23, int64_t{1} << 23, 1, 64, 64).fits);
  // 32-bit coordinates with room for one tile.
  EXPECT_FALSE(native_gemm_fits(kGemmDimLimit, 1, 1, 1));
  EXPECT_FALSE(native_gemm_fits(1, kGemmDimLimit, 1, 1));
  EXPECT_FALSE(native_gemm_fits(1, 1, kGemmDimLimit, 1));
  EXPECT_TRUE(native_gemm_fits(kGemmDimLimit - 1, 1, 1, 1));
  EXPECT_FALSE(native_gemm_fits(-1, 1, 1, 1));
}
