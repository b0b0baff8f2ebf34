// Not yet measured: no GPU has run the sweep (bench_gpu --tiles --write-tuned, gpu-check.sh step 10).
// The float GEMM's tile per measured shape on sm_90 (core/cuda/gemm_tuning.h: a call takes the
// nearest entry; none: the default). Regenerate rather than edit; a new architecture's file
// also needs its line in core/cuda/tuned/tables.h.
#pragma once

#include <array>

#include "core/cuda/gemm_tuning.h"

namespace ember::cuda {

// clang-format off
inline constexpr std::array<TunedGemm, 0> kTunedSm90 = {{
}};
// clang-format on

}  // namespace ember::cuda
