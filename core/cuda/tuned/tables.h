// The tuned tables by GPU architecture (10 x major + minor compute capability). Each file is written
// by the autotune sweep on a lent GPU (core/cuda/gemm_tuning_header.h) and committed; an
// architecture with no file here has no table and takes the default tile.
#pragma once

#include <span>

#include "core/cuda/gemm_tuning.h"
#include "core/cuda/tuned/sm90.h"

namespace ember::cuda {

constexpr std::span<const TunedGemm> tuned_gemm_table(int sm) {
  switch (sm) {
    case 90:
      return kTunedSm90;
    default:
      return {};
  }
}

}  // namespace ember::cuda
