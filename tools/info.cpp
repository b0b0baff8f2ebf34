// `ember info`: what this build of Ember is and what it finds on this machine: version, the
// backends compiled in, the CPU with its capability levels (built, available, chosen), the math
// threads, and the CUDA devices. The first thing to paste into a bug report.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/blas_kernels.h"
#include "core/cpu_capability.h"
#include "core/device.h"
#include "core/parallel.h"
#include "ember/config.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
int info(const std::vector<std::string>& args) {
  Flags f;
  f.add("help", "", "show this help");
  const std::string usage = usage_of("ember info", f);
  return run_leaf("ember info", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    std::printf("Ember %s\n", EMBER_VERSION);
    std::printf("backends:        cpu%s%s%s\n", EMBER_WITH_CUDA ? ", cuda" : "", EMBER_WITH_CUDNN ? ", cudnn" : "",
                EMBER_WITH_NCCL ? ", nccl" : "");
    std::printf("cpu:             %s\n", cpu_model_name().c_str());
    std::printf("cpu features:    %s\n", cpu_feature_list().c_str());
    std::printf("levels built:    %s\n", cpu_capability_names(cpu_capabilities_built()).c_str());
    std::printf("levels usable:   %s\n", cpu_capability_names(cpu_capabilities_available()).c_str());
    std::printf("math threads:    %d\n", get_num_threads());
    std::printf("blas kernels:    OpenBLAS %s\n", blas_kernels_description().c_str());
    if (blas_below_cpu()) {
      // Only OPENBLAS_CORETYPE (or an OpenBLAS that refused the switch) leaves it below the CPU.
      const BlasKernels& k = blas_kernels();
      if (k.chosen_by == BlasKernelsChooser::Environment)
        std::printf(
            "hint:            OPENBLAS_CORETYPE=%s in the environment holds OpenBLAS to older kernels than this "
            "CPU runs; without it OpenBLAS or Ember chooses its best (AVX-512 SGEMM is 1.9x its AVX2 rate on "
            "an AMD Zen 5: bench/history/2026-12.md)\n",
            k.environment.c_str());
      else
        std::printf("hint:            OpenBLAS did not take the kernels this CPU can run; it keeps its %s ones\n",
                    k.name.c_str());
    }
    std::printf("cuda devices:    %d\n", cuda_device_count());
    // Last: an unusable EMBER_CPU_CAPABILITY is this command's one failure (status 1, its message).
    std::printf("level in use:    %s%s\n", cpu_capability_name(cpu_capability()),
                std::getenv("EMBER_CPU_CAPABILITY") && *std::getenv("EMBER_CPU_CAPABILITY") ? " (EMBER_CPU_CAPABILITY)"
                                                                                            : " (the best usable)");
    return 0;
  });
}

}  // namespace ember::tools
