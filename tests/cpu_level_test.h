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

class CpuLevelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto level = static_cast<CpuCapability>(EMBER_CPU_LEVEL);
    if (!cpu_supports(level))
      GTEST_SKIP() << "skipped: this CPU (" << cpu_model_name() << ") lacks " << cpu_capability_name(level);
  }
};

}  // namespace ember::testing

#define EMBER_CPU_LEVEL_SUITE_(suite, ns) suite##_##ns
#define EMBER_CPU_LEVEL_SUITE(suite, ns) EMBER_CPU_LEVEL_SUITE_(suite, ns)
// Declares the fixture of a per-level suite; once per suite and file, before its tests.
#define EMBER_CPU_LEVEL_FIXTURE(suite) using EMBER_CPU_LEVEL_SUITE(suite, EMBER_CPU_NS) = ::ember::testing::CpuLevelTest
#define EMBER_CPU_LEVEL_TEST(suite, name) TEST_F(EMBER_CPU_LEVEL_SUITE(suite, EMBER_CPU_NS), name)
