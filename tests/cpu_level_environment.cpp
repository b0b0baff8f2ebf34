// Linked into the test programs that ctest runs once more per CPU capability level
// (tests/CMakeLists.txt: entries named Suite.Test@level, run with EMBER_TEST_CPU_LEVEL=<level>).
// Such a run puts the level in EMBER_CPU_CAPABILITY before any kernel runs, so the library picks
// it up the way a user's setting would. It is skipped, with the reason, where this CPU cannot run
// the level, and where the level is the one this CPU picks by default, which the plain entry of
// the same test already ran: a level is never reported as passed without having run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/cpu_capability.h"

namespace {

class CpuLevelEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* env = std::getenv("EMBER_TEST_CPU_LEVEL");
    if (!env || !*env) return;
    // A bad value fails here, with the library's message, rather than in every test.
    const ember::CpuCapability c = ember::parse_cpu_capability(env);
    if (!ember::cpu_supports(c)) GTEST_SKIP() << "skipped: this CPU (" << ember::cpu_model_name() << ") lacks " << env;
    const auto available = ember::cpu_capabilities_available();
    if (!available.empty() && available.back() == c)
      GTEST_SKIP() << "skipped: " << env << " is this CPU's default level, which the plain run of this test covers";
    ::setenv("EMBER_CPU_CAPABILITY", env, 1);
    // Where something already ran a kernel (the choice is made once), switch explicitly.
    if (ember::cpu_capability() != c) ember::set_cpu_capability(c);
  }
};

[[maybe_unused]] ::testing::Environment* const g_environment =
    ::testing::AddGlobalTestEnvironment(new CpuLevelEnvironment);

}  // namespace
