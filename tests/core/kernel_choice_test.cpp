// The native/vendor/auto switch with fake candidates and a fake timer: parsing EMBER_KERNELS,
// the per-family API, auto's timing once per shape and its cache, the deterministic filter, and
// the errors.
#include "core/kernel_choice.h"

#include <ember/config.h>
#include <gtest/gtest.h>

#include <map>

#include "test_helpers.h"

using namespace ember;
using test_util::error_of;
using test_util::has;

namespace {

// Two fake implementations that record how often they ran; the timer reports a fixed cost per
// implementation (identified by which counter the run bumps).
struct Fakes {
  int native_runs = 0, vendor_runs = 0, timed = 0;
  double native_cost = 1.0, vendor_cost = 2.0;
  std::string last;  // which one wrote the output last
  KernelCandidate native{true, true, [this] {
                           ++native_runs;
                           last = "native";
                         }};
  KernelCandidate vendor{true, true, [this] {
                           ++vendor_runs;
                           last = "vendor";
                         }};
  KernelTimer timer = [this](const std::function<void()>& fn) {
    ++timed;
    const int before = native_runs;
    fn();
    return native_runs != before ? native_cost : vendor_cost;
  };
};

class KernelChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { detail::reset_kernel_choices(nullptr); }
  void TearDown() override { detail::reset_kernel_choices(nullptr); }
  KernelSelector sel;
  Fakes f;
};

}  // namespace

TEST_F(KernelChoiceTest, ParsesChoicesAndFamilies) {
  EXPECT_EQ(parse_kernel_choice("native"), KernelChoice::Native);
  EXPECT_EQ(parse_kernel_choice("vendor"), KernelChoice::Vendor);
  EXPECT_EQ(parse_kernel_choice("auto"), KernelChoice::Auto);
  EXPECT_EQ(parse_kernel_family("batch_norm"), KernelFamily::BatchNorm);
  for (int i = 0; i < kNumKernelFamilies; ++i) {
    const auto fam = static_cast<KernelFamily>(i);
    EXPECT_EQ(parse_kernel_family(kernel_family_name(fam)), fam);
  }
  EXPECT_TRUE(has(error_of([] { parse_kernel_choice("cudnn"); }), "'cudnn' is not one of native, vendor, auto"));
  EXPECT_TRUE(has(error_of([] { parse_kernel_family("lstm"); }), "'lstm' is not an op family"));
}

TEST_F(KernelChoiceTest, DefaultIsAutoForEveryFamily) {
  for (int i = 0; i < kNumKernelFamilies; ++i)
    EXPECT_EQ(kernel_choice(static_cast<KernelFamily>(i)), KernelChoice::Auto);
}

TEST_F(KernelChoiceTest, EnvironmentSetsAllOrSomeFamilies) {
  detail::reset_kernel_choices("vendor");
  for (int i = 0; i < kNumKernelFamilies; ++i)
    EXPECT_EQ(kernel_choice(static_cast<KernelFamily>(i)), KernelChoice::Vendor);
  detail::reset_kernel_choices(" gemm=native , conv=vendor");
  EXPECT_EQ(kernel_choice(KernelFamily::Gemm), KernelChoice::Native);
  EXPECT_EQ(kernel_choice(KernelFamily::Conv), KernelChoice::Vendor);
  EXPECT_EQ(kernel_choice(KernelFamily::Rnn), KernelChoice::Auto);
}

TEST_F(KernelChoiceTest, InvalidSpecThrowsAndChangesNothing) {
  set_kernel_choice(KernelFamily::Pool, KernelChoice::Native);
  EXPECT_TRUE(has(error_of([] { set_kernel_choices("gemm=vendor,pool"); }), "'pool' is not family=choice"));
  EXPECT_TRUE(has(error_of([] { set_kernel_choices("gemm=vendor,pool=fast"); }), "'fast'"));
  EXPECT_TRUE(has(error_of([] { set_kernel_choices("matmul=vendor"); }), "'matmul' is not an op family"));
  EXPECT_EQ(kernel_choice(KernelFamily::Gemm), KernelChoice::Auto) << "a half-applied spec";
  EXPECT_EQ(kernel_choice(KernelFamily::Pool), KernelChoice::Native);
  set_kernel_choices("rnn=vendor");
  EXPECT_EQ(kernel_choice(KernelFamily::Rnn), KernelChoice::Vendor);
  EXPECT_EQ(kernel_choice(KernelFamily::Pool), KernelChoice::Native) << "unnamed families keep their choice";
}

TEST_F(KernelChoiceTest, NativeAndVendorRunExactlyTheirCandidateOnce) {
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Native);
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "k", f.native, f.vendor, f.timer), KernelPick::Native);
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Vendor);
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "k", f.native, f.vendor, f.timer), KernelPick::Vendor);
  EXPECT_EQ(f.native_runs, 1);
  EXPECT_EQ(f.vendor_runs, 1);
  EXPECT_EQ(f.timed, 0);
  EXPECT_EQ(sel.size(), 0u);
}

TEST_F(KernelChoiceTest, AutoTimesOncePerShapeAndKeepsTheFaster) {
  f.native_cost = 3.0;
  f.vendor_cost = 1.0;
  EXPECT_EQ(sel.run(KernelFamily::Conv, "shape-a", f.native, f.vendor, f.timer), KernelPick::Vendor);
  EXPECT_EQ(f.timed, 2);
  EXPECT_EQ(f.last, "vendor") << "the output must be the winner's";
  EXPECT_EQ(sel.cached(KernelFamily::Conv, "shape-a"), KernelPick::Vendor);
  // Later calls of the same shape run the winner once, untimed, even if the costs change.
  f.native_cost = 0.1;
  const int n0 = f.native_runs, v0 = f.vendor_runs;
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(sel.run(KernelFamily::Conv, "shape-a", f.native, f.vendor, f.timer), KernelPick::Vendor);
  EXPECT_EQ(f.native_runs, n0);
  EXPECT_EQ(f.vendor_runs, v0 + 5);
  EXPECT_EQ(f.timed, 2);
  // A new shape is timed afresh, and the same key in another family is another entry.
  EXPECT_EQ(sel.run(KernelFamily::Conv, "shape-b", f.native, f.vendor, f.timer), KernelPick::Native);
  EXPECT_EQ(f.last, "native");
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "shape-a", f.native, f.vendor, f.timer), KernelPick::Native);
  EXPECT_EQ(f.timed, 6);
  EXPECT_EQ(sel.size(), 3u);
  sel.clear();
  EXPECT_FALSE(sel.cached(KernelFamily::Conv, "shape-a").has_value());
}

TEST_F(KernelChoiceTest, AutoWarmsUpBeforeTimingAndPrefersNativeOnTies) {
  f.native_cost = f.vendor_cost = 5.0;
  EXPECT_EQ(sel.run(KernelFamily::Pool, "k", f.native, f.vendor, f.timer), KernelPick::Native);
  EXPECT_EQ(f.native_runs, 2);  // warm-up + timed
  EXPECT_EQ(f.vendor_runs, 2);
  EXPECT_EQ(f.last, "native");
}

TEST_F(KernelChoiceTest, AutoDoesNotTimeAnOpThatCannotRunTwice) {
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "beta=1", f.native, f.vendor, f.timer, /*may_time=*/false), KernelPick::Vendor);
  EXPECT_EQ(f.native_runs + f.vendor_runs, 1);
  EXPECT_EQ(f.timed, 0);
  EXPECT_FALSE(sel.cached(KernelFamily::Gemm, "beta=1").has_value());
}

TEST_F(KernelChoiceTest, AnUnavailableCandidateIsNeverRunOrTimed) {
  f.native.available = false;
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Native);  // asked for, but missing: vendor
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "k", f.native, f.vendor, f.timer), KernelPick::Vendor);
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Auto);
  EXPECT_EQ(sel.run(KernelFamily::Gemm, "k", f.native, f.vendor, f.timer), KernelPick::Vendor);
  EXPECT_EQ(f.native_runs, 0);
  EXPECT_EQ(f.timed, 0);
  EXPECT_EQ(sel.size(), 0u) << "nothing to choose between, nothing cached";
}

TEST_F(KernelChoiceTest, DeterministicModeFiltersCandidates) {
  f.vendor.deterministic = false;  // e.g. a cuDNN algorithm with float atomics
  f.vendor_cost = 0.5;
  set_deterministic(true);
  EXPECT_TRUE(deterministic());
  set_kernel_choice(KernelFamily::Conv, KernelChoice::Vendor);
  EXPECT_EQ(sel.run(KernelFamily::Conv, "k", f.native, f.vendor, f.timer), KernelPick::Native);
  set_kernel_choice(KernelFamily::Conv, KernelChoice::Auto);
  EXPECT_EQ(sel.run(KernelFamily::Conv, "k", f.native, f.vendor, f.timer), KernelPick::Native);
  EXPECT_EQ(f.vendor_runs, 0);
  set_deterministic(false);
  EXPECT_EQ(sel.run(KernelFamily::Conv, "k", f.native, f.vendor, f.timer), KernelPick::Vendor);
}

TEST_F(KernelChoiceTest, NoRunnableCandidateIsAnErrorNamingFamilyAndKey) {
  f.native.available = false;
  f.vendor.deterministic = false;
  set_deterministic(true);
  const std::string msg = error_of([&] { sel.run(KernelFamily::Rnn, "lstm T=5 B=3", f.native, f.vendor, f.timer); });
  EXPECT_TRUE(has(msg, "rnn: no deterministic kernel can run lstm T=5 B=3")) << msg;
  EXPECT_TRUE(has(msg, "native: not available")) << msg;
  EXPECT_TRUE(has(msg, "vendor: not deterministic")) << msg;
  EXPECT_EQ(f.vendor_runs, 0);
}

TEST_F(KernelChoiceTest, NativeEntriesAreKeptPerStubAndFamily) {
  // Two stand-in stubs: entries are keyed by the stub's address, created empty on first lookup.
  // has_native() is process-wide: in CUDA builds the real native kernels are registered too, so
  // it is compared with its value before the test rather than with false.
  static int stub_a = 0, stub_b = 0;
  const bool pool_before = has_native(KernelFamily::Pool), bn_before = has_native(KernelFamily::BatchNorm);
  EXPECT_EQ(native_entry(&stub_a, KernelFamily::Pool).fn, nullptr);
  EXPECT_EQ(has_native(KernelFamily::Pool), pool_before) << "an empty entry is no kernel";
  NativeEntry& e = native_entry(&stub_a, KernelFamily::Pool);
  e.fn = &stub_b;
  e.deterministic = false;
  EXPECT_TRUE(has_native(KernelFamily::Pool));
  EXPECT_EQ(has_native(KernelFamily::BatchNorm), bn_before);
  EXPECT_EQ(native_entry(&stub_a, KernelFamily::Pool).fn, &stub_b);
  EXPECT_FALSE(native_entry(&stub_a, KernelFamily::Pool).deterministic);
  EXPECT_EQ(native_entry(&stub_b, KernelFamily::Pool).fn, nullptr);
  e.fn = nullptr;  // leave the process-wide table as it was
  EXPECT_EQ(has_native(KernelFamily::Pool), pool_before);
}

TEST_F(KernelChoiceTest, OnlyBackendsRegisterVendorFamilies) {
  // CPU-only builds have no vendor implementations; CUDA builds register theirs at load time
  // (checked in tests/core/cuda/cuda_runtime_test.cpp).
  for (int i = 0; i < kNumKernelFamilies; ++i) {
    const auto f = static_cast<KernelFamily>(i);
    if (!EMBER_WITH_CUDA) {
      EXPECT_FALSE(has_vendor(f)) << kernel_family_name(f);
    }
  }
}
