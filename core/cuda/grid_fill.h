// How many blocks a kernel that chooses its own grid (split-K slices, row slices of a reduction)
// aims at: enough to fill a large GPU twice over, two resident blocks on each of an H100's or
// H200's 132 SMs. Plain C++, host only.
#pragma once

#include <cstdint>

namespace ember::cuda {

inline constexpr int64_t kFillBlocks = 2 * 132;

}  // namespace ember::cuda
