// The reference side and the verdict of slp_aggregate_test.cpp, compiled for the default target:
// it runs on any CPU, and calls into the AVX-512 side only where the CPU has AVX-512 (elsewhere it
// says "skipped:", which ctest reports as a skip).
#include <cstdio>
#include <string>
#include <vector>

#include "core/cpu_capability.h"
#include "slp_aggregate_cases.h"

std::vector<std::string> slp_by_value_descriptions();  // slp_aggregate_test.cpp, AVX-512 flags

int main() {
  if (!ember::cpu_supports(ember::CpuCapability::Avx512)) {
    std::printf("skipped: this CPU (%s) lacks avx512\n", ember::cpu_model_name().c_str());
    return 0;
  }
  std::vector<std::string> want;
  std::vector<const char*> names;
#define SLP_REFERENCE(name, type, describe)    \
  want.push_back(slp_cases::describe(type{})); \
  names.push_back(#name);
  SLP_AGGREGATE_CASES(SLP_REFERENCE)
#undef SLP_REFERENCE
  const std::vector<std::string> got = slp_by_value_descriptions();
  int wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got.at(i) == want[i]) continue;
    ++wrong;
    std::printf("%s: passed by value as %s, expected %s\n", names[i], got[i].c_str(), want[i].c_str());
  }
#if SLP_FENCED
  if (wrong) {
    std::printf("FAIL: %d aggregate(s) miscompiled with the avx512 kernels' own flags\n", wrong);
    return 1;
  }
  std::printf("ok: all %zu aggregates intact with the avx512 kernels' flags\n", want.size());
#else
  if (wrong && !SLP_COMPILER_FENCED) {
    std::printf(
        "FAIL: this compiler miscompiles AVX-512 aggregate initialisation and the build does not fence "
        "it: add it to EMBER_GCC_SLP_BUG (cmake/EmberCpuDispatch.cmake)\n");
    return 1;
  }
  std::printf("ok: %s\n", wrong ? "this compiler miscompiles without the fence, and the build fences it"
                                : "no miscompilation with -march=x86-64-v4 alone");
#endif
  return 0;
}
