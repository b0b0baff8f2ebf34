// Which of OpenBLAS's kernel families runs Ember's GEMMs, and who chose it.
//
// A DYNAMIC_ARCH OpenBLAS (Debian's) picks a family by CPU model when it loads. A release that
// predates the CPU falls back to old kernels: Debian 12's 0.3.21 takes its SSE3 "Prescott" ones on
// an AVX-512 Intel Xeon of cpuid family 6, model 207, a quarter of the CPU's rate or less. When
// the library loads, Ember replaces such a pick with the best family the CPU can run (SKYLAKEX on
// an AVX-512 CPU, HASWELL on an AVX2 one). It never overrides OPENBLAS_CORETYPE: a family the user
// or the machine's environment asked for is kept, and `ember info` says so when it is below the
// CPU.
#pragma once

#include <string>

#include "core/cpu_capability.h"

namespace ember {

enum class BlasKernelsChooser {
  OpenBlas,     // OpenBLAS's own pick by CPU model
  Environment,  // OPENBLAS_CORETYPE, kept as asked
  Ember,        // Ember replaced OpenBLAS's pick, which was below the CPU
};

struct BlasKernels {
  std::string name;  // as openblas_get_corename spells it: "Haswell", "SkylakeX", ...
  BlasKernelsChooser chosen_by = BlasKernelsChooser::OpenBlas;
  std::string openblas_pick;  // OpenBLAS's own pick when Ember replaced it, else empty
  std::string environment;    // OPENBLAS_CORETYPE's value at load, else empty
};

// The family in use. The first call (or the loading of libember_core) makes Ember's choice.
const BlasKernels& blas_kernels();
// "SkylakeX", "Haswell (OPENBLAS_CORETYPE=Haswell)", "SkylakeX (Ember's choice over OpenBLAS's
// Prescott)": what every benchmark header and `ember info` print.
std::string blas_kernels_description();
// True when the CPU can run a better family than the one in use (OPENBLAS_CORETYPE asked for it,
// or OpenBLAS could not be switched).
bool blas_below_cpu();

namespace detail {
// The choice made at load, made again now (tests call it after forcing OpenBLAS's pick).
BlasKernels choose_blas_kernels();
// blas_kernels_description() for `k`.
std::string describe(const BlasKernels& k);
// The level of the CPU that OpenBLAS family `name` needs: Baseline for the families before AVX2,
// Avx2 for Haswell, Zen and Excavator, Avx512 for SkylakeX, Cooperlake and SapphireRapids.
// Returns false for a name Ember does not know (a newer OpenBLAS's): such a pick is left alone.
bool blas_family_level(const std::string& name, CpuCapability* level);
// The family Ember loads instead of OpenBLAS's pick `picked` on a CPU whose best level is `cpu`,
// or "" when the pick is as good as the CPU allows or unknown to Ember.
std::string blas_upgrade(const std::string& picked, CpuCapability cpu);
// Makes OpenBLAS load kernel family `name` (OPENBLAS_CORETYPE's spelling) now, through its
// DYNAMIC_ARCH entry points. No BLAS call may run meanwhile. Returns false when OpenBLAS is not a
// DYNAMIC_ARCH build or did not take the family; the family in use is then unchanged or
// OpenBLAS's fallback, which openblas_get_corename reports.
bool load_blas_family(const std::string& name);
// True for a DYNAMIC_ARCH OpenBLAS, whose kernel family can be chosen at run time.
bool blas_family_switchable();
// openblas_get_corename's answer now.
std::string blas_family_in_use();
}  // namespace detail

}  // namespace ember
