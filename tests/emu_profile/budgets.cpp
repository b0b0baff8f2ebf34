// The budgets each kernel family is held to (tests/emu_profile/budget_test.cpp), on the shapes of
// representative_cases() (cases.cpp). Occupancy targets are each kernel's design point: the float
// GEMM's (the vectorised warp-tiled kernel, 128 x 128 tiles: the shapes are 16-byte aligned) 256
// threads at about 128 registers keep two blocks per SM (25%); its double variant's
// 4 x 4 doubles per thread need about 200 registers, one block (12.5%); the float implicit-GEMM
// conv on the GEMM's warp tiles (conv_warptile.h) keeps 25%: 256 threads in two blocks, or 128
// threads in four, at up to 128 registers.
#include "emu_profile/kernel_report.h"

namespace kernel_report {

const std::vector<Budget>& budgets() {
  // family, kernel name contains, min global efficiency, max shared wavefronts per ideal,
  // min occupancy, max spill bytes
  static const std::vector<Budget> b = {
      {"gemm (float)", "sgemm_warptile<", 0.90, 1.10, 0.25, 0},
      {"gemm (double)", "gemm_kernel<double", 0.90, 1.10, 0.125, 0},
      {"conv (implicit gemm)", "implicit_gemm_warptile<", 0.90, 1.10, 0.25, 0},
  };
  return b;
}

const std::vector<Waiver>& waivers() {
  // None: the float GEMM's registers (issue 50) and the conv's gather were fixed in the kernels.
  static const std::vector<Waiver> w = {};
  return w;
}

}  // namespace kernel_report
