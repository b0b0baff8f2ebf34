#include "core/parallel.h"

#include "core/cpu_capability.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

namespace ember {

int get_num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  if (n < 1) n = 1;
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
  openblas_set_num_threads(n);
}

std::string blas_kernels() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

bool blas_below_cpu() {
  if (!cpu_supports(CpuCapability::Avx512)) return false;
  // OpenBLAS's names for its AVX-512 kernel families, as openblas_get_corename spells them.
  const std::string k = blas_kernels();
  return k != "SkylakeX" && k != "Cooperlake" && k != "SapphireRapids";
}

}  // namespace ember
