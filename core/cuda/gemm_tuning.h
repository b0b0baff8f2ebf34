// Which tile configuration the float GEMM's warp-tiled kernel (core/cuda/sgemm_warptile.h) runs
// for a call, by the order core/cuda/gemm.cu asks:
//   1. EMBER_GEMM_TILE, when set (the autotune sweep sets it; an unknown name is an ember::Error);
//   2. else the tuned table of the GPU's architecture (core/cuda/tuned/sm<NN>.h, written by the
//      sweep on a lent GPU and committed): the entry whose measured shape is nearest the call's,
//      nearness being the product over m, n and k of the larger over the smaller (a sum of
//      |log| distances, so 2x too large and 2x too small weigh the same);
//   3. else, with no table or an empty one (the emulator, an architecture never measured), the
//      default, 128x128x8.
// Host code only, header-only: the emulated kernel build compiles core/cuda/*.cu without the
// backend's .cpp files, and both need the lookup.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ember::cuda {

// The warp-tiled kernel's configurations, by block tile BM x BN x BK.
enum class GemmTile : uint8_t { k128x128x8, k128x64x8, k64x128x8 };

inline constexpr std::array<GemmTile, 3> kGemmTiles = {GemmTile::k128x128x8, GemmTile::k128x64x8, GemmTile::k64x128x8};
inline constexpr GemmTile kDefaultGemmTile = GemmTile::k128x128x8;

constexpr std::string_view gemm_tile_name(GemmTile t) {
  switch (t) {
    case GemmTile::k128x64x8:
      return "128x64x8";
    case GemmTile::k64x128x8:
      return "64x128x8";
    case GemmTile::k128x128x8:
      break;
  }
  return "128x128x8";
}

constexpr std::optional<GemmTile> gemm_tile_named(std::string_view name) {
  for (GemmTile t : kGemmTiles)
    if (gemm_tile_name(t) == name) return t;
  return std::nullopt;
}

// One measured shape and the tile that ran it fastest.
struct TunedGemm {
  int64_t m, n, k;
  GemmTile tile;
};

// The tile of the entry nearest (m, n, k); the default when the table is empty. Ties go to the
// earlier entry. A zero extent counts as 1 (a k = 0 GEMM only scales C).
constexpr GemmTile tuned_gemm_tile(std::span<const TunedGemm> table, int64_t m, int64_t n, int64_t k) {
  auto ratio = [](int64_t a, int64_t b) {
    const double x = static_cast<double>(a < 1 ? 1 : a), y = static_cast<double>(b < 1 ? 1 : b);
    return x > y ? x / y : y / x;
  };
  GemmTile best = kDefaultGemmTile;
  double best_d = 0;
  bool any = false;
  for (const TunedGemm& e : table) {
    const double d = ratio(m, e.m) * ratio(n, e.n) * ratio(k, e.k);
    if (!any || d < best_d) best = e.tile, best_d = d, any = true;
  }
  return best;
}

}  // namespace ember::cuda
