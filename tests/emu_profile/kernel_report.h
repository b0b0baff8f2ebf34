// The kernel efficiency report (docs/cuda/kernel-report.md): the emulator's counters per kernel
// (core/cuda/emu/profile.h) with ptxas's registers, shared memory and spills, the theoretical
// occupancy on sm_80 and sm_90, a roofline lower bound on an H100 and an H200, and the budgets
// each kernel family is held to. Every number is the emulator's prediction, not a measurement.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "core/cuda/emu/profile.h"
#include "core/device.h"

namespace kernel_report {

namespace profile = ember::emu::profile;

// ptxas -v's figures for one kernel on one architecture.
struct PtxasInfo {
  int regs = -1;  // -1: unknown
  int smem = 0;   // static shared bytes per block
  int spill = 0;  // spill stores + loads, bytes
};
// By demangled kernel name ("(anonymous namespace)" for nvcc's and the host's anonymous
// namespaces alike), then architecture ("sm_80").
using PtxasTable = std::map<std::string, std::map<std::string, PtxasInfo>>;
// Reads every *.ptxas.log under `dir` (a CUDA build leaves one beside each kernel object).
PtxasTable load_ptxas(const std::string& dir);
PtxasTable parse_ptxas(const std::string& log_text);
std::string demangle(const std::string& mangled);

// The CUDA occupancy calculator's rules for one architecture.
struct Arch {
  const char* name;
  int smem_per_sm;  // the largest carve-out, bytes
};
const Arch kSm80{"sm_80", 164 * 1024};
const Arch kSm90{"sm_90", 228 * 1024};
struct Occupancy {
  int blocks = 0;         // resident blocks per SM
  double fraction = 0.0;  // resident warps / 64
  std::string limiter;    // "regs", "smem", "warps" or "blocks"
};
Occupancy occupancy(const Arch& arch, int regs_per_thread, size_t smem_per_block, unsigned threads);

// Peak rates from NVIDIA's data sheets (SXM parts), as scripts/gpu-check.sh has them.
struct Gpu {
  const char* name;
  double hbm_bytes_per_s, fp32_flops_per_s, fp64_flops_per_s;
  int sms;
};
const Gpu kH100{"H100", 3.35e12, 67e12, 34e12, 132};
const Gpu kH200{"H200", 4.8e12, 67e12, 34e12, 132};
// max(bytes at HBM bandwidth, FLOPs at peak), seconds.
double roofline_seconds(const Gpu& g, double bytes, double flops, bool fp64);

// A representative use of the kernels: `make` builds the inputs on a device (the emulator's
// `emu`, or a GPU for Nsight Compute; not profiled) and returns the call to profile; `flops` are credited to the
// kernels whose name contains `flop_kernel`.
struct Case {
  std::string name;
  std::function<std::function<void()>(ember::Device)> make;
  double flops = 0;
  std::string flop_kernel;
  bool fp64 = false;
};

// One kernel of one case.
struct Row {
  std::string case_name, kernel, stub;
  int launches = 0;
  std::vector<int> positions;  // its launches' places in the case's sequence of launches (from 0)
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::vector<uint64_t> launch_blocks;  // each launch's grid size, in blocks
  size_t smem = 0;                      // static + dynamic shared bytes per block
  profile::Totals totals;
  std::vector<profile::SiteStats> sites;
  PtxasInfo sm80, sm90;
  Occupancy occ80, occ90;
  double flops = 0;
  bool fp64 = false;
};

// How much of the GPU the row's launches fill, averaged over them: a launch of b blocks with s
// resident blocks per SM (`occ`) on g.sms SMs runs ceil(b / (s sms)) waves and fills
// b / (waves s sms) of their slots (a per-step GEMM of 4 blocks: 4 of 264 on an H100 at two blocks
// per SM). Negative when the occupancy is unknown (no ptxas data).
double sm_fill(const Row& r, const Occupancy& occ, const Gpu& g);

// Runs the case in a profiling session and returns a row per kernel it launched.
std::vector<Row> run_case(const Case& c, const PtxasTable& ptxas);
// Rows of the given launches, grouped by kernel (exposed for tests with their own launches).
std::vector<Row> rows_of(const std::string& case_name, const std::vector<profile::Launch>& launches,
                         const PtxasTable& ptxas);
void print_table(std::ostream& os, const std::vector<Row>& rows);
// The instructions below the global-efficiency or shared-wavefront budget, with file:line.
// Every instruction of the row, with its counts.
void print_sites(std::ostream& os, const Row& row);
void print_worst_sites(std::ostream& os, const std::vector<Row>& rows, size_t per_row);

// A kernel family's budget (tests/emu_profile/budgets.cpp).
struct Budget {
  std::string family, kernel;  // rows whose kernel name contains `kernel`
  double min_global_efficiency = 0.0;
  double max_shared_excess = 1e9;  // wavefronts per ideal wavefront (1 = conflict-free)
  double min_occupancy = 0.0;      // on sm_80 and sm_90, from ptxas (skipped without its data)
  int max_spill_bytes = 0;
};
const std::vector<Budget>& budgets();
// A known breach of a budget, accepted until the kernel is fixed: the budget test prints it instead
// of failing, and fails when it no longer occurs (so the waiver goes once the fix lands).
struct Waiver {
  std::string kernel;     // the row's kernel name contains it
  std::string violation;  // the check's message contains it: the measured figure too, so a worse one fails
  std::string why;
};
const std::vector<Waiver>& waivers();
// The waiver that accepts `violation` (one of check()'s messages) of `row`; null when none does.
const Waiver* waiver_for(const Row& row, const std::string& violation);
// What the row breaks of the budget; empty when within it.
std::vector<std::string> check(const Row& row, const Budget& b);

// One of issue 50's hardware targets (tests/emu_profile/targets.cpp): a call too large to emulate,
// run dry (launches recorded, no thread run); `passes` name the kernels that carry its FLOPs, an
// equal share each (a convolution's forward, backward-data and backward-filter).
struct Target {
  std::string name, goal;  // "sgemm 2048^3", ">= 0.9x cuBLAS"
  double goal_ratio = 0;
  double vendor_tflops = 0;  // the vendor's rate on the last lent GPU; 0: not measured
  double flops = 0;
  std::vector<std::string> passes;
  std::function<std::function<void()>(ember::Device)> make;
};
struct PassFill {
  std::string pass, kernel;
  std::vector<uint64_t> launch_blocks;
  double fill = -1;  // sm_fill on an H100; negative: unknown
};
struct Prediction {
  const Target* target = nullptr;
  std::vector<PassFill> passes;
  double ceiling_flops_per_s = 0;  // 0: unknown (no ptxas data, or a pass not launched)
};
std::vector<Target> issue50_targets();
Prediction predict(const Target& t, const PtxasTable& ptxas);
void print_targets(std::ostream& os, const std::vector<Prediction>& v);

// The cases the report prints (tests/emu_profile/cases.cpp).
std::vector<Case> representative_cases();

// Where the build's ptxas logs are (this build's own, when it has CUDA).
std::string default_ptxas_dir();

}  // namespace kernel_report
