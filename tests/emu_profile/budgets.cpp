// The budgets each kernel family is held to (tests/emu_profile/budget_test.cpp), on the shapes of
// representative_cases() (cases.cpp). Occupancy targets are each kernel's design point: the float
// GEMM's 256 threads at about 128 registers keep two blocks per SM (25%); its double variant's
// 4 x 4 doubles per thread need about 200 registers, one block (12.5%); the implicit-GEMM conv
// runs 256 threads at up to 126 registers.
#include "emu_profile/kernel_report.h"

namespace kernel_report {

const std::vector<Budget>& budgets() {
  // family, kernel name contains, min global efficiency, max shared wavefronts per ideal,
  // min occupancy, max spill bytes
  static const std::vector<Budget> b = {
      {"gemm (float)", "gemm_kernel<float", 0.90, 1.10, 0.25, 0},
      {"gemm (double)", "gemm_kernel<double", 0.90, 1.10, 0.125, 0},
      {"conv (implicit gemm)", "implicit_gemm<float", 0.90, 1.10, 0.25, 0},
  };
  return b;
}

const std::vector<Waiver>& waivers() {
  static const std::vector<Waiver> w = {
      // ptxas gives the 8 x 8 register tile 179-206 registers (sm_80/sm_90): one block of 256
      // threads per SM. __launch_bounds__(256, 2) or a smaller tile per thread is issue 50's
      // second half.
      {"gemm_kernel<float", "occupancy 12.5% < 25.0%", "float GEMM: 179-206 registers, one block per SM"},
      // The im2col gather reads input rows shifted by the filter tap (kw - 1 = -1, 0, 1 floats),
      // so two of three taps straddle a sector more than needed, and padded lanes are masked. The
      // waiver names today's figure, as the one above does: a conv that coalesces worse (or
      // better) no longer matches it, and fails the test until it is looked at.
      {"implicit_gemm<float", "global efficiency 87.3% < 90%", "conv im2col gather: shifted rows straddle sectors"},
  };
  return w;
}

}  // namespace kernel_report
