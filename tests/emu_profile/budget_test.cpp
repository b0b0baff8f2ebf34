// The kernel families' budgets (budgets.cpp) on the report's representative shapes, the check's
// proof that it looks (a planted uncoalesced GEMM and a bank-conflicting transpose must fail the
// GEMM budget; so must a row with too few resident warps or a spill), and the occupancy rules.
#include <gtest/gtest.h>

#include <iostream>

#include "core/cuda/emu/emu.h"
#include "core/cuda/emu/emu_device.h"
#include "core/ops.h"
#include "emu_profile/hand_kernels.h"
#include "emu_profile/kernel_report.h"

using namespace kernel_report;
using ember::Tensor;

namespace {

const Budget& budget(const std::string& family) {
  for (const Budget& b : budgets())
    if (b.family == family) return b;
  throw std::runtime_error("no budget " + family);
}

template <typename F>
std::vector<Row> profiled(const std::string& name, F run) {
  profile::Session s;
  run();
  return rows_of(name, s.take(), load_ptxas(default_ptxas_dir()));
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + "\n";
  return s;
}

}  // namespace

// Every family's kernels within their budget on the report's shapes, in each of the emulator's
// three thread orders (the counts must not depend on which lane runs first), but for the waived
// breaches (budgets.cpp), which are printed, and must still occur.
TEST(KernelBudgets, RepresentativeCasesMeetTheirBudgets) {
  const PtxasTable ptxas = load_ptxas(default_ptxas_dir());
  std::map<std::string, int> reached;
  std::vector<int> waiver_used(waivers().size(), 0);
  using ember::emu::ThreadOrder;
  for (ThreadOrder order : {ThreadOrder::Forward, ThreadOrder::Reverse, ThreadOrder::Random})
    for (const Case& c : representative_cases()) {
      if (c.flop_kernel.empty()) continue;  // the families with budgets: GEMM and conv main loops
      ember::emu::ScopedOptions scoped(order, 7);
      SCOPED_TRACE(ember::emu::thread_order_name(order));
      for (const Row& r : run_case(c, ptxas)) {
        for (const Budget& b : budgets()) {
          if (r.kernel.find(b.kernel) == std::string::npos) continue;
          ++reached[b.family];
          for (const std::string& v : check(r, b)) {
            const Waiver* w = waiver_for(r, v);
            if (!w) {
              ADD_FAILURE() << v;
              continue;
            }
            ++waiver_used[static_cast<size_t>(w - waivers().data())];
            std::cout << "waived: " << v << " (" << w->why << ")\n";
          }
        }
      }
    }
  for (const Budget& b : budgets()) EXPECT_GT(reached[b.family], 0) << b.family << ": no case reached it";
  // Occupancy waivers need ptxas data, which only CUDA builds have.
  for (size_t w = 0; w < waivers().size(); ++w)
    if (!ptxas.empty() || waivers()[w].violation.find("occupancy") == std::string::npos)
      EXPECT_GT(waiver_used[w], 0) << "waiver no longer needed, remove it: " << waivers()[w].kernel << ": "
                                   << waivers()[w].violation;
}

// A GEMM whose lanes walk rows of A: about one sector per lane, far below 90%.
TEST(KernelBudgets, PlantedUncoalescedGemmFails) {
  const int m = 128, n = 8, k = 64;
  Tensor a = ember::randn({m, k}).to(ember::emu::device()), b = ember::randn({k, n}).to(ember::emu::device());
  Tensor c = ember::zeros({m, n}).to(ember::emu::device());
  const std::vector<Row> rows = profiled("planted", [&] {
    hand::naive_gemm_uncoalesced(static_cast<const float*>(a.raw_data()), static_cast<const float*>(b.raw_data()),
                                 static_cast<float*>(c.raw_data()), m, n, k);
  });
  ASSERT_EQ(rows.size(), 1u);
  const std::string v = joined(check(rows[0], budget("gemm (float)")));
  EXPECT_NE(v.find("global efficiency"), std::string::npos) << v;
}

// A transpose through an unpadded tile: 32 wavefronts per column read.
TEST(KernelBudgets, PlantedBankConflictFails) {
  Tensor in = ember::randn({1024}).to(ember::emu::device()), out = ember::zeros({1024}).to(ember::emu::device());
  const std::vector<Row> rows = profiled("planted", [&] {
    hand::transpose_tile(static_cast<const float*>(in.raw_data()), static_cast<float*>(out.raw_data()), false);
  });
  ASSERT_EQ(rows.size(), 1u);
  const std::string v = joined(check(rows[0], budget("gemm (float)")));
  EXPECT_NE(v.find("shared wavefronts"), std::string::npos) << v;
  const std::vector<Row> padded = profiled("padded", [&] {
    hand::transpose_tile(static_cast<const float*>(in.raw_data()), static_cast<float*>(out.raw_data()), true);
  });
  EXPECT_EQ(joined(check(padded[0], budget("gemm (float)"))), "");
}

// ptxas figures that break the budget: too many registers for two blocks of 256, and a spill.
TEST(KernelBudgets, PlantedOccupancyAndSpillFail) {
  Row r;
  r.case_name = "planted", r.kernel = "gemm_kernel<float, false, false>";
  r.block[0] = 256;
  r.totals.global_load.requests = 1;  // something was counted
  r.sm80 = r.sm90 = PtxasInfo{255, 17408, 0};
  r.occ80 = occupancy(kSm80, 255, 17408, 256);
  r.occ90 = occupancy(kSm90, 255, 17408, 256);
  std::string v = joined(check(r, budget("gemm (float)")));
  EXPECT_NE(v.find("sm_80 occupancy 12.5% < 25.0%"), std::string::npos) << v;
  r.sm80 = r.sm90 = PtxasInfo{128, 17408, 8};
  r.occ80 = occupancy(kSm80, 128, 17408, 256);
  r.occ90 = occupancy(kSm90, 128, 17408, 256);
  v = joined(check(r, budget("gemm (float)")));
  EXPECT_NE(v.find("sm_90 spills 8 bytes"), std::string::npos) << v;
  EXPECT_EQ(v.find("occupancy"), std::string::npos) << v;
}

// The occupancy calculator's answers for sm_80 and sm_90.
TEST(KernelBudgets, OccupancyFollowsTheCalculator) {
  EXPECT_EQ(occupancy(kSm80, 32, 0, 256).blocks, 8);  // 64 warps: full
  EXPECT_DOUBLE_EQ(occupancy(kSm80, 32, 0, 256).fraction, 1.0);
  EXPECT_EQ(occupancy(kSm80, 128, 17408, 256).blocks, 2);  // 4096 registers per warp
  EXPECT_EQ(occupancy(kSm80, 128, 17408, 256).limiter, "regs");
  EXPECT_EQ(occupancy(kSm80, 72, 0, 256).blocks, 3);  // 2304 per warp: 7 warps per sub-partition
  EXPECT_EQ(occupancy(kSm80, 16, 0, 32).blocks, 32);  // the block limit
  EXPECT_EQ(occupancy(kSm80, 16, 0, 32).limiter, "blocks");
  EXPECT_EQ(occupancy(kSm80, 32, 100 * 1024, 128).blocks, 1);  // 164 KiB per SM
  EXPECT_EQ(occupancy(kSm90, 32, 100 * 1024, 128).blocks, 2);  // 228 KiB per SM
  EXPECT_EQ(occupancy(kSm90, 32, 100 * 1024, 128).limiter, "smem");
  EXPECT_EQ(occupancy(kSm80, 32, 48 * 1024 - 1024, 256).blocks, 3);  // the 1 KiB reserved per block
}

// The share of an H100 a row's launches fill: b blocks in ceil(b / 132 s) waves of 132 s slots.
TEST(KernelBudgets, SmFillCountsWavesOfResidentBlocks) {
  Row r;
  Occupancy two;
  two.blocks = 2;  // the float GEMM's two blocks per SM
  r.launch_blocks = {4};
  EXPECT_DOUBLE_EQ(sm_fill(r, two, kH100), 4.0 / 264);  // an LSTM step's GEMM
  r.launch_blocks = {264};
  EXPECT_DOUBLE_EQ(sm_fill(r, two, kH100), 1.0);
  r.launch_blocks = {265};
  EXPECT_DOUBLE_EQ(sm_fill(r, two, kH100), 265.0 / 528);  // a second wave of one block
  r.launch_blocks = {4, 8};
  EXPECT_DOUBLE_EQ(sm_fill(r, two, kH100), (4.0 / 264 + 8.0 / 264) / 2);  // the launches' mean
  EXPECT_LT(sm_fill(r, Occupancy{}, kH100), 0.0);                         // no ptxas data: unknown
  r.launch_blocks.clear();
  EXPECT_LT(sm_fill(r, two, kH100), 0.0);
}

// A target's call runs dry with the dispatch's own grids: SGEMM 2048^3 in 256 blocks of the default
// 128 x 128 tile, which at ptxas's two resident blocks per SM fill 256 of an H100's 264 slots; its
// ceiling is the FP32 peak times that. The LSTM step's GEMM is 4 blocks.
TEST(KernelTargets, DryRunsGiveTheDispatchedGridsAndTheirCeilings) {
  const PtxasTable ptxas = load_ptxas(default_ptxas_dir());
  const std::vector<Target> targets = issue50_targets();
  auto find = [&](const std::string& name) {
    for (const Target& t : targets)
      if (t.name == name) return &t;
    ADD_FAILURE() << "no target " << name;
    return &targets[0];
  };
  const Prediction big = predict(*find("sgemm 2048^3"), ptxas);
  ASSERT_EQ(big.passes.size(), 1u);
  EXPECT_EQ(big.passes[0].launch_blocks, std::vector<uint64_t>{256});
  const Prediction step = predict(*find("sgemm LSTM step 32x512x128"), ptxas);
  EXPECT_EQ(step.passes[0].launch_blocks, std::vector<uint64_t>{4});
  const Prediction conv = predict(*find("resnet 3x3 32x64x56x56 -> 64 fwd+bwd"), ptxas);
  ASSERT_EQ(conv.passes.size(), 3u);
  for (const PassFill& f : conv.passes) EXPECT_FALSE(f.launch_blocks.empty()) << f.pass << " was not launched";
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas data in this build: fills and ceilings unknown";
  EXPECT_NEAR(big.passes[0].fill, 256.0 / 264, 1e-12);
  EXPECT_NEAR(big.ceiling_flops_per_s, 67e12 * 256 / 264, 1e3);
  EXPECT_NEAR(step.ceiling_flops_per_s, 67e12 * 4 / 264, 1e3);
}

// A breach a waiver names is accepted, in the report as in the test; any other is not.
TEST(KernelBudgets, WaiversAcceptOnlyTheBreachTheyName) {
  Row r;
  r.kernel = "implicit_gemm_bf16<conv::Forward<unsigned short>, false>";
  const Waiver* w = waiver_for(r, "conv / implicit_gemm_bf16 (conv (bfloat16)): global efficiency 76.5% < 90%");
  ASSERT_NE(w, nullptr);
  EXPECT_NE(w->why.find("2-byte"), std::string::npos);
  EXPECT_EQ(waiver_for(r, "conv / implicit_gemm_bf16 (conv (bfloat16)): global efficiency 60.0% < 90%"), nullptr);
  r.kernel = "sgemm_warptile<WarpTile<2, 4, 8>, false, false>";
  EXPECT_EQ(waiver_for(r, "mm / sgemm_warptile (gemm (float)): global efficiency 76.5% < 90%"), nullptr);
}

// ptxas -v lines as nvcc prints them, nvcc's anonymous namespace read like the host's.
TEST(KernelBudgets, ParsesPtxasLog) {
  const PtxasTable t = parse_ptxas(
      "ptxas info    : Compiling entry function '_ZN5ember4cuda45_GLOBAL__N__e55e9fec_7_gemm_cu_16635a5d_"
      "1323010dot_kernelIfEEvPT_PKS3_lS6_ll' for 'sm_90'\n"
      "ptxas info    : Function properties for x\n"
      "    0 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 18 registers, used 1 barriers, 256 bytes smem, 400 bytes cmem[0]\n");
  const std::string name =
      "void ember::cuda::(anonymous namespace)::dot_kernel<float>(float*, float const*, long, "
      "float const*, long, long)";
  ASSERT_EQ(t.count(name), 1u) << (t.empty() ? "" : t.begin()->first);
  const PtxasInfo p = t.at(name).at("sm_90");
  EXPECT_EQ(p.regs, 18);
  EXPECT_EQ(p.smem, 256);
  EXPECT_EQ(p.spill, 12);
}
