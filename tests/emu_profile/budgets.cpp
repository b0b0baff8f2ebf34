// The budgets each kernel family is held to (tests/emu_profile/budget_test.cpp), on the shapes of
// representative_cases() (cases.cpp). Occupancy targets are each kernel's design point: the float
// GEMM's (the vectorised warp-tiled kernel, 128 x 128 tiles: the shapes are 16-byte aligned) 256
// threads at about 128 registers keep two blocks per SM (25%); its double variant's
// 4 x 4 doubles per thread need about 200 registers, one block (12.5%); the float implicit-GEMM
// conv on the GEMM's warp tiles (conv_warptile.h) keeps 25%: 256 threads in two blocks, or 128
// threads in four, at up to 128 registers. The bfloat16 GEMM and convolution on the tensor cores
// (gemm_bf16_mma.h, conv_bf16_mma.h) hold 64 float accumulators a lane beside their fragments:
// about 190 registers, one block of 8 warps per SM (12.5%).
#include "emu_profile/kernel_report.h"

namespace kernel_report {

const std::vector<Budget>& budgets() {
  // family, kernel name contains, min global efficiency, max shared wavefronts per ideal,
  // min occupancy, max spill bytes
  static const std::vector<Budget> b = {
      {"gemm (float)", "sgemm_warptile<", 0.90, 1.10, 0.25, 0},
      {"gemm (double)", "gemm_kernel<double", 0.90, 1.10, 0.125, 0},
      {"conv (implicit gemm)", "implicit_gemm_warptile<", 0.90, 1.10, 0.25, 0},
      {"gemm (bfloat16)", "gemm_bf16_mma<", 0.90, 1.10, 0.125, 0},
      {"conv (bfloat16)", "implicit_gemm_bf16<", 0.90, 1.10, 0.125, 0},
  };
  return b;
}

const std::vector<Waiver>& waivers() {
  // The float GEMM's registers (issue 50) and the float conv's gather were fixed in the kernels.
  static const std::vector<Waiver> w = {
      {"implicit_gemm_bf16<", "global efficiency 76.5%",
       "the bfloat16 conv gathers 2-byte elements, a warp's 32 consecutive output columns one 64-byte run of "
       "an input row that the kernel column shifts off the 32-byte sectors (3 sectors for 2: 67%); cp.async "
       "copies at least 4 bytes, and a 4-byte load of two pixels is aligned only for every other shift"},
  };
  return w;
}

const Waiver* waiver_for(const Row& row, const std::string& violation) {
  for (const Waiver& w : waivers())
    if (row.kernel.find(w.kernel) != std::string::npos && violation.find(w.violation) != std::string::npos) return &w;
  return nullptr;
}

}  // namespace kernel_report
