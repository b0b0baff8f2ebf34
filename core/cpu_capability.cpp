// CPU capability detection and the one choice of level per process (core/cpu_capability.h).
#include "core/cpu_capability.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/blas_kernels.h"
#include "core/error.h"
#include "ember/config.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define EMBER_X86 1
#else
#define EMBER_X86 0
#endif

namespace ember {

namespace detail {
std::atomic<int> g_cpu_capability{kCpuUnchosen};
}  // namespace detail

namespace {

struct X86Features {
  bool sse42 = false, popcnt = false, avx = false, avx2 = false, fma = false, bmi1 = false, bmi2 = false, f16c = false,
       lzcnt = false, movbe = false;
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false, avx512vl = false, avx512bf16 = false;
  bool os_avx = false;     // XCR0 enables the SSE and AVX register state
  bool os_avx512 = false;  // ... and the opmask and upper ZMM state
};

#if EMBER_X86
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  // xgetbv by its opcode: the mnemonic needs -mxsave, which the baseline build does not have.
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif

X86Features detect() {
  X86Features f;
#if EMBER_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  const unsigned max_leaf = static_cast<unsigned>(__get_cpuid_max(0, nullptr));
  if (max_leaf < 1) return f;
  __cpuid(1, a, b, c, d);
  f.sse42 = c & (1u << 20);
  f.popcnt = c & (1u << 23);
  f.fma = c & (1u << 12);
  f.movbe = c & (1u << 22);
  f.avx = c & (1u << 28);
  f.f16c = c & (1u << 29);
  const bool osxsave = c & (1u << 27);
  if (osxsave) {
    const uint64_t xcr0 = xgetbv0();
    f.os_avx = (xcr0 & 0x6) == 0x6;       // XMM and YMM state
    f.os_avx512 = (xcr0 & 0xe6) == 0xe6;  // and opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.bmi1 = b & (1u << 3);
    f.avx2 = b & (1u << 5);
    f.bmi2 = b & (1u << 8);
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512cd = b & (1u << 28);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
  }
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) >= 0x80000001u) {
    __cpuid(0x80000001u, a, b, c, d);
    f.lzcnt = c & (1u << 5);
  }
#endif
  return f;
}

const X86Features& features() {
  static const X86Features f = detect();
  return f;
}

bool has_avx2_level(const X86Features& f) {
  return f.os_avx && f.avx && f.avx2 && f.fma && f.bmi1 && f.bmi2 && f.f16c && f.lzcnt && f.movbe;
}
bool has_avx512_level(const X86Features& f) {
  return has_avx2_level(f) && f.os_avx512 && f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl;
}
bool has_avx512bf16_level(const X86Features& f) {
  return has_avx512_level(f) && f.avx512bf16;
}

bool built(CpuCapability c) {
  return (EMBER_CPU_CAPABILITIES_BUILT >> static_cast<int>(c)) & 1;
}

CpuCapability best_available() {
  const std::vector<CpuCapability> av = cpu_capabilities_available();
  EMBER_CHECK(!av.empty(), "this build of Ember has no CPU kernels this CPU can run (built: ",
              cpu_capability_names(cpu_capabilities_built()), ")");
  return av.back();
}

// The level `spec` (EMBER_CPU_CAPABILITY's value) asks for, checked against this CPU and build.
CpuCapability requested(const std::string& spec) {
  if (spec.empty()) return best_available();
  CpuCapability c;
  try {
    c = parse_cpu_capability(spec);
  } catch (const Error& e) {
    EMBER_FAIL("EMBER_CPU_CAPABILITY=", spec, ": ", e.what());
  }
  EMBER_CHECK(built(c), "EMBER_CPU_CAPABILITY=", spec, ": this build of Ember has no ", spec,
              " kernels (it has: ", cpu_capability_names(cpu_capabilities_built()), ")");
  EMBER_CHECK(cpu_supports(c), "EMBER_CPU_CAPABILITY=", spec, ": this CPU (", cpu_model_name(), ") lacks ", spec,
              " (it has: ", cpu_capability_names(cpu_capabilities_available()), ")");
  return c;
}

// Why the choice failed, under its mutex. A function-local static: the first CPU kernel call may
// come from another library's static initialiser.
struct ChoiceState {
  std::mutex mu;
  std::string error;
};
ChoiceState& choice_state() {
  static ChoiceState s;
  return s;
}

}  // namespace

const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::Baseline:
      return "baseline";
    case CpuCapability::Avx2:
      return "avx2";
    case CpuCapability::Avx512:
      return "avx512";
    case CpuCapability::Avx512Bf16:
      return "avx512bf16";
    case CpuCapability::Native:
      return "native";
  }
  return "?";
}

CpuCapability parse_cpu_capability(const std::string& s) {
  for (int i = 0; i < kNumCpuCapabilities; ++i)
    if (s == cpu_capability_name(static_cast<CpuCapability>(i))) return static_cast<CpuCapability>(i);
  EMBER_FAIL("'", s, "' is not a CPU capability level (expected baseline, avx2, avx512, avx512bf16 or native)");
}

std::string cpu_capability_names(const std::vector<CpuCapability>& levels) {
  std::string s;
  for (CpuCapability c : levels) {
    if (!s.empty()) s += ", ";
    s += cpu_capability_name(c);
  }
  return s.empty() ? "none" : s;
}

std::vector<CpuCapability> cpu_capabilities_built() {
  std::vector<CpuCapability> v;
  for (int i = 0; i < kNumCpuCapabilities; ++i)
    if (built(static_cast<CpuCapability>(i))) v.push_back(static_cast<CpuCapability>(i));
  return v;
}

bool cpu_supports(CpuCapability c) {
  switch (c) {
    case CpuCapability::Baseline:
    case CpuCapability::Native:
      return true;
    case CpuCapability::Avx2:
      return has_avx2_level(features());
    case CpuCapability::Avx512:
      return has_avx512_level(features());
    case CpuCapability::Avx512Bf16:
      return has_avx512bf16_level(features());
  }
  return false;
}

std::vector<CpuCapability> cpu_capabilities_available() {
  std::vector<CpuCapability> v;
  for (CpuCapability c : cpu_capabilities_built())
    if (cpu_supports(c)) v.push_back(c);
  return v;
}

namespace detail {

int choose_cpu_capability() {
  std::lock_guard<std::mutex> lock(choice_state().mu);
  int c = g_cpu_capability.load(std::memory_order_relaxed);
  if (c != kCpuUnchosen) return c;
  const char* env = std::getenv("EMBER_CPU_CAPABILITY");
  try {
    c = static_cast<int>(requested(env ? env : ""));
  } catch (const Error& e) {
    choice_state().error = e.what();
    c = kCpuChoiceFailed;
  }
  g_cpu_capability.store(c, std::memory_order_relaxed);
  return c;
}

void fail_no_cpu_kernel(const char* stub_name) {
  if (cpu_capability_index() == kCpuChoiceFailed) {
    std::lock_guard<std::mutex> lock(choice_state().mu);
    EMBER_FAIL(stub_name, ": no CPU kernel can run: ", choice_state().error);
  }
  EMBER_FAIL(stub_name, ": no kernel registered for device cpu at level ",
             cpu_capability_name(static_cast<CpuCapability>(cpu_capability_index())));
}

}  // namespace detail

CpuCapability cpu_capability() {
  const int c = detail::cpu_capability_index();
  if (c == detail::kCpuChoiceFailed) {
    std::lock_guard<std::mutex> lock(choice_state().mu);
    throw Error(choice_state().error);
  }
  return static_cast<CpuCapability>(c);
}

void set_cpu_capability(CpuCapability c) {
  EMBER_CHECK(built(c), "set_cpu_capability(", cpu_capability_name(c),
              "): this build has no such kernels (it has: ", cpu_capability_names(cpu_capabilities_built()), ")");
  EMBER_CHECK(cpu_supports(c), "set_cpu_capability(", cpu_capability_name(c), "): this CPU (", cpu_model_name(),
              ") lacks it (it has: ", cpu_capability_names(cpu_capabilities_available()), ")");
  std::lock_guard<std::mutex> lock(choice_state().mu);
  choice_state().error.clear();
  detail::g_cpu_capability.store(static_cast<int>(c), std::memory_order_relaxed);
}

std::string cpu_model_name() {
#if EMBER_X86
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) >= 0x80000004u) {
    unsigned r[12];
    for (unsigned i = 0; i < 3; ++i) __cpuid(0x80000002u + i, r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
    char brand[49] = {};
    std::memcpy(brand, r, 48);
    std::string s(brand);
    const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
    if (b != std::string::npos) {
      // The family and model too: a VM's brand string can be as bare as "AMD EPYC", the same on
      // Zen 4 (family 25) and Zen 5 (family 26), whose AVX-512 units differ in width.
      unsigned a = 0, bx = 0, c = 0, d = 0;
      __cpuid(1, a, bx, c, d);
      const unsigned base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
      const unsigned family = base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family;
      const unsigned model =
          base_family == 0x6 || base_family == 0xF ? base_model + (((a >> 16) & 0xF) << 4) : base_model;
      return s.substr(b, e - b + 1) + " (family " + std::to_string(family) + ", model " + std::to_string(model) + ")";
    }
  }
#endif
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    // "model name" on x86 and most others; "Model" on some ARM boards; "cpu" on POWER.
    for (const char* key : {"model name", "Model", "cpu"}) {
      if (line.rfind(key, 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos || line.find_first_not_of(" \t", std::strlen(key)) != colon) continue;
      const size_t v = line.find_first_not_of(" \t", colon + 1);
      if (v != std::string::npos) return line.substr(v);
    }
  }
  return "unknown CPU";
}

std::string cpu_feature_list() {
  const X86Features& f = features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.sse42, "sse4.2");
  add(f.popcnt, "popcnt");
  add(f.avx && f.os_avx, "avx");
  add(f.avx2 && f.os_avx, "avx2");
  add(f.fma && f.os_avx, "fma");
  add(f.f16c && f.os_avx, "f16c");
  add(f.bmi1, "bmi1");
  add(f.bmi2, "bmi2");
  add(f.lzcnt, "lzcnt");
  add(f.movbe, "movbe");
  add(f.avx512f && f.os_avx512, "avx512f");
  add(f.avx512bw && f.os_avx512, "avx512bw");
  add(f.avx512cd && f.os_avx512, "avx512cd");
  add(f.avx512dq && f.os_avx512, "avx512dq");
  add(f.avx512vl && f.os_avx512, "avx512vl");
  add(f.avx512bf16 && f.os_avx512, "avx512bf16");
  return s.empty() ? "none of the x86 extensions" : s;
}

std::string cpu_description() {
  std::string level;
  try {
    level = cpu_capability_name(cpu_capability());
  } catch (const Error&) {
    level = "none (EMBER_CPU_CAPABILITY is not usable here)";
  }
  return cpu_model_name() + ", kernels at " + level + " (of " + cpu_capability_names(cpu_capabilities_available()) +
         "), OpenBLAS " + blas_kernels_description();
}

}  // namespace ember
