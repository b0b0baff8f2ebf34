// Which instruction-set level Ember's CPU kernels run at. The kernels in every cpu/ folder are
// compiled once per level (cmake/EmberCpuDispatch.cmake) and registered into their dispatch stub
// under that level; the level is chosen once, at the first CPU kernel call, from the CPU's cpuid
// and the environment:
//     EMBER_CPU_CAPABILITY=baseline|avx2|avx512|avx512bf16   (unset or empty: the best this CPU has)
// A level this CPU lacks, or that this build does not hold, is an ember::Error at the first CPU
// kernel call (and from cpu_capability()), never a silent fallback or an illegal instruction.
//
//   baseline  the compiler's default target (x86-64 on x86: SSE2), and the only level elsewhere
//   avx2      x86-64-v3: AVX, AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE
//   avx512    x86-64-v4: the above and AVX-512 F, BW, CD, DQ, VL
//   avx512bf16  the above and AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16: Zen 4 and later, Cooper Lake,
//             Sapphire Rapids). Only the files that have bfloat16 kernels are compiled for it
//             (EMBER_CPU_BF16_SOURCES in cmake/EmberCpuDispatch.cmake); every other stub runs its
//             avx512 kernel there (core/dispatch.h: the nearest lower level's)
//   native    a build configured with EMBER_NATIVE=ON: the kernels compiled once, for the build
//             machine's CPU (-march=native); no other level exists in such a build
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace ember {

enum class CpuCapability : int { Baseline = 0, Avx2 = 1, Avx512 = 2, Avx512Bf16 = 3, Native = 4 };
inline constexpr int kNumCpuCapabilities = 5;

const char* cpu_capability_name(CpuCapability c);  // "baseline", "avx2", "avx512", "avx512bf16", "native"
// The level named s; an ember::Error naming s and the accepted names otherwise.
CpuCapability parse_cpu_capability(const std::string& s);

// The levels this build compiled its kernels for, lowest first.
std::vector<CpuCapability> cpu_capabilities_built();
// Whether this CPU (and its operating system, for the AVX and AVX-512 register state) can run a
// level's code. Baseline and native always can.
bool cpu_supports(CpuCapability c);
// Built and supported, lowest first: the levels a test can run here.
std::vector<CpuCapability> cpu_capabilities_available();
// "baseline, avx2, avx512" ("none" for an empty list), for messages and reports.
std::string cpu_capability_names(const std::vector<CpuCapability>& levels);

// The level CPU kernels run at now: EMBER_CPU_CAPABILITY if set, else the best available.
// Throws when EMBER_CPU_CAPABILITY names a level that is not available.
CpuCapability cpu_capability();
// Switches every CPU kernel to another available level (tests and benchmarks compare levels in one
// process with it). Not to be called while CPU kernels run on other threads.
void set_cpu_capability(CpuCapability c);

// The processor as cpuid names it, with its family and model ("Intel(R) Xeon(R) Platinum 8480+
// (family 6, model 143)"), or /proc/cpuinfo's model name where there is no cpuid; "unknown CPU"
// when neither says.
std::string cpu_model_name();
// The instruction-set extensions the levels care about that this CPU has, e.g.
// "sse4.2 avx avx2 fma avx512f avx512bw avx512vl avx512bf16".
std::string cpu_feature_list();
// One line for program banners and benchmark headers: "Intel(R) Xeon(R) Processor (family 6,
// model 143), kernels at avx512 (of baseline, avx2, avx512), OpenBLAS SapphireRapids".
std::string cpu_description();

namespace detail {
// What the dispatch stubs read on every CPU call: the chosen level; kCpuUnchosen before the first
// call, kCpuChoiceFailed when EMBER_CPU_CAPABILITY named a level that is not available.
inline constexpr int kCpuUnchosen = -2;
inline constexpr int kCpuChoiceFailed = -1;
extern std::atomic<int> g_cpu_capability;
int choose_cpu_capability();  // makes the choice once and returns it (never throws)
inline int cpu_capability_index() {
  const int c = g_cpu_capability.load(std::memory_order_relaxed);
  return c != kCpuUnchosen ? c : choose_cpu_capability();
}
[[noreturn]] void fail_no_cpu_kernel(const char* stub_name);
}  // namespace detail

}  // namespace ember
