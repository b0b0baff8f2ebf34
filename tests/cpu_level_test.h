// Tests compiled once per CPU capability level (a tests/.../cpu/ file added with
// ember_cpu_sources(), see cmake/EmberCpuDispatch.cmake): EMBER_CPU_LEVEL_TEST(Suite, Name)
// defines Suite_level_<level>.Name, skipped where this CPU cannot run the level's code (calling it
// would be an illegal instruction), so each level is tested wherever it can run and reported
// as skipped elsewhere.
#pragma once

#include <gtest/gtest.h>

#include "core/cpu/capability.h"
#include "core/cpu_capability.h"

namespace ember::testing {
// One fixture per level, in the level's namespace: SetUp reads EMBER_CPU_LEVEL, which differs
// between the files of each level, so a single class would be one inline function defined
// differently per file, and the linker kept one of them for every level. It was the baseline's,
// which skips nothing: on an AMD EPYC without AVX-512 (Zen 3) the avx512 suites ran and died of
// illegal instructions instead of being skipped.
inline namespace EMBER_CPU_NS {

class CpuLevelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto level = static_cast<CpuCapability>(EMBER_CPU_LEVEL);
    if (!cpu_supports(level))
      GTEST_SKIP() << "skipped: this CPU (" << cpu_model_name() << ") lacks " << cpu_capability_name(level);
  }
};

}  // namespace EMBER_CPU_NS
}  // namespace ember::testing

#define EMBER_CPU_LEVEL_SUITE_(suite, ns) suite##_##ns
#define EMBER_CPU_LEVEL_SUITE(suite, ns) EMBER_CPU_LEVEL_SUITE_(suite, ns)
// Declares the fixture of a per-level suite; once per suite and file, before its tests.
#define EMBER_CPU_LEVEL_FIXTURE(suite) \
  using EMBER_CPU_LEVEL_SUITE(suite, EMBER_CPU_NS) = ::ember::testing::EMBER_CPU_NS::CpuLevelTest
#define EMBER_CPU_LEVEL_TEST(suite, name) TEST_F(EMBER_CPU_LEVEL_SUITE(suite, EMBER_CPU_NS), name)
