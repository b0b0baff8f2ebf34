// Ember's choice of OpenBLAS kernels: which families count as below a CPU, which one replaces them,
// that the switch really loads the new kernels (which then compute the same products), and that an
// OPENBLAS_CORETYPE given by the user or the machine is kept.
#include "core/blas_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/cpu_capability.h"
#include "core/ops/creation.h"
#include "core/tensor.h"

using namespace ember;

namespace {

CpuCapability best_level() {
  if (cpu_supports(CpuCapability::Avx512)) return CpuCapability::Avx512;
  if (cpu_supports(CpuCapability::Avx2)) return CpuCapability::Avx2;
  return CpuCapability::Baseline;
}

// Puts back, at the end of a test, the family in use and OPENBLAS_CORETYPE as they were.
class BlasFamilies : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!detail::blas_family_switchable())
      GTEST_SKIP() << "this OpenBLAS is built for one CPU (no DYNAMIC_ARCH): its kernels cannot be switched";
    family_ = detail::blas_family_in_use();
    if (const char* e = std::getenv("OPENBLAS_CORETYPE")) env_ = e;
  }
  void TearDown() override {
    if (family_.empty()) return;  // skipped
    EXPECT_TRUE(detail::load_blas_family(family_)) << family_;
    if (env_)
      ::setenv("OPENBLAS_CORETYPE", env_->c_str(), 1);
    else
      ::unsetenv("OPENBLAS_CORETYPE");
  }
  std::string family_;
  std::optional<std::string> env_;
};

// Largest |a·b − (a·b in float64)| over a 96 × 80 × 72 float32 product, relative to its scale.
double product_error() {
  Tensor a = randn({96, 80}), b = randn({80, 72});
  Tensor c = a.matmul(b).to(DType::Float64);
  Tensor ref = a.to(DType::Float64).matmul(b.to(DType::Float64));
  return c.sub(ref).abs().max().item() / ref.abs().max().item();
}

}  // namespace

TEST(BlasKernels, FamiliesNeedTheLevelsOfTheirInstructions) {
  CpuCapability l;
  ASSERT_TRUE(detail::blas_family_level("Prescott", &l));
  EXPECT_EQ(l, CpuCapability::Baseline);
  ASSERT_TRUE(detail::blas_family_level("Sandybridge", &l));  // AVX without FMA: below AVX2
  EXPECT_EQ(l, CpuCapability::Baseline);
  ASSERT_TRUE(detail::blas_family_level("haswell", &l));  // OPENBLAS_CORETYPE's spelling too
  EXPECT_EQ(l, CpuCapability::Avx2);
  ASSERT_TRUE(detail::blas_family_level("Zen", &l));
  EXPECT_EQ(l, CpuCapability::Avx2);
  ASSERT_TRUE(detail::blas_family_level("Cooperlake", &l));
  EXPECT_EQ(l, CpuCapability::Avx512);
  EXPECT_FALSE(detail::blas_family_level("Zen5", &l));  // a later OpenBLAS's name: not Ember's to judge
  EXPECT_FALSE(detail::blas_family_level("", &l));
}

TEST(BlasKernels, APickBelowTheCpuIsReplacedByTheBestFamilyItRuns) {
  EXPECT_EQ(detail::blas_upgrade("Prescott", CpuCapability::Avx512), "SKYLAKEX");
  EXPECT_EQ(detail::blas_upgrade("Haswell", CpuCapability::Avx512), "SKYLAKEX");
  EXPECT_EQ(detail::blas_upgrade("Prescott", CpuCapability::Avx2), "HASWELL");
  EXPECT_EQ(detail::blas_upgrade("Sandybridge", CpuCapability::Avx2), "HASWELL");
  // As good as the CPU allows, or unknown: left alone.
  EXPECT_EQ(detail::blas_upgrade("Zen", CpuCapability::Avx2), "");
  EXPECT_EQ(detail::blas_upgrade("SkylakeX", CpuCapability::Avx512), "");
  EXPECT_EQ(detail::blas_upgrade("SapphireRapids", CpuCapability::Avx512), "");
  EXPECT_EQ(detail::blas_upgrade("Prescott", CpuCapability::Baseline), "");
  EXPECT_EQ(detail::blas_upgrade("Zen5", CpuCapability::Avx512), "");
}

// Every family this CPU can run is loaded for real, and computes the same products.
TEST_F(BlasFamilies, SwitchingLoadsTheFamilyAndKeepsProductsRight) {
  std::vector<std::pair<std::string, std::string>> families = {{"PRESCOTT", "Prescott"}};
  if (cpu_supports(CpuCapability::Avx2)) families.push_back({"HASWELL", "Haswell"});
  if (cpu_supports(CpuCapability::Avx512)) families.push_back({"SKYLAKEX", "SkylakeX"});
  for (const auto& [asked, spelled] : families) {
    ASSERT_TRUE(detail::load_blas_family(asked)) << asked;
    EXPECT_EQ(detail::blas_family_in_use(), spelled);
    EXPECT_LT(product_error(), 1e-5) << asked;
    // The variable is OpenBLAS's input for the switch only: it is back as it was.
    const char* e = std::getenv("OPENBLAS_CORETYPE");
    EXPECT_EQ(e ? std::optional<std::string>(e) : std::nullopt, env_) << asked;
  }
}

// What happens when libember_core loads on a CPU OpenBLAS does not know: its fallback pick (here
// forced to Prescott) is replaced by the best family the CPU runs, and `ember info` says whose
// choice it is. With OPENBLAS_CORETYPE set, the same pick is kept and named.
TEST_F(BlasFamilies, AnOldPickIsReplacedUnlessOpenblasCoretypeAskedForIt) {
  ASSERT_TRUE(detail::load_blas_family("PRESCOTT"));
  ::unsetenv("OPENBLAS_CORETYPE");
  BlasKernels k = detail::choose_blas_kernels();
  if (best_level() == CpuCapability::Baseline) {
    EXPECT_EQ(k.chosen_by, BlasKernelsChooser::OpenBlas);
    EXPECT_EQ(k.name, "Prescott");
  } else {
    EXPECT_EQ(k.chosen_by, BlasKernelsChooser::Ember);
    EXPECT_EQ(k.openblas_pick, "Prescott");
    EXPECT_EQ(k.name, best_level() == CpuCapability::Avx512 ? "SkylakeX" : "Haswell");
    EXPECT_EQ(detail::blas_family_in_use(), k.name);
    EXPECT_EQ(detail::describe(k), k.name + " (Ember's choice over OpenBLAS's Prescott)");
    EXPECT_LT(product_error(), 1e-5);
  }
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);

  ASSERT_TRUE(detail::load_blas_family("PRESCOTT"));
  ::setenv("OPENBLAS_CORETYPE", "prescott", 1);
  k = detail::choose_blas_kernels();
  EXPECT_EQ(k.chosen_by, BlasKernelsChooser::Environment);
  EXPECT_EQ(k.name, "Prescott");
  EXPECT_EQ(detail::blas_family_in_use(), "Prescott");
  EXPECT_EQ(detail::describe(k), "Prescott (OPENBLAS_CORETYPE=prescott)");
}

// In this process: the family in use is the one the choice made at load reported, and it is below
// the CPU only where OPENBLAS_CORETYPE asked for that.
TEST(BlasKernels, TheChoiceAtLoadIsTheFamilyInUse) {
  const BlasKernels& k = blas_kernels();
  EXPECT_EQ(k.name, detail::blas_family_in_use());
  const char* e = std::getenv("OPENBLAS_CORETYPE");
  if (e && *e) {
    EXPECT_EQ(k.chosen_by, BlasKernelsChooser::Environment);
    EXPECT_EQ(k.environment, e);
  } else {
    EXPECT_NE(k.chosen_by, BlasKernelsChooser::Environment);
    EXPECT_FALSE(blas_below_cpu()) << blas_kernels_description();
  }
}
