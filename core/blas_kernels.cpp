#include "core/blas_kernels.h"

#include <strings.h>

#include <cstdlib>
#include <mutex>

extern "C" char* openblas_get_corename(void);
// DYNAMIC_ARCH OpenBLAS only: drop the kernel table, and choose one again (from OPENBLAS_CORETYPE
// when it is set, else by CPU model). Weak, so that an OpenBLAS built for one CPU, which has
// neither, still links; the choice is then left to it.
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));

namespace ember {
namespace {

struct Family {
  const char* name;
  CpuCapability level;
};

// OpenBLAS's kernel families on x86-64 (0.3.21's list, as openblas_get_corename spells them) and
// the level each needs. "Opteron(SSE3)" is how 0.3.21 spells its SSE3 Opteron.
constexpr Family kFamilies[] = {
    {"Katmai", CpuCapability::Baseline},        {"Coppermine", CpuCapability::Baseline},
    {"Northwood", CpuCapability::Baseline},     {"Prescott", CpuCapability::Baseline},
    {"Banias", CpuCapability::Baseline},        {"Atom", CpuCapability::Baseline},
    {"Core2", CpuCapability::Baseline},         {"Penryn", CpuCapability::Baseline},
    {"Dunnington", CpuCapability::Baseline},    {"Nehalem", CpuCapability::Baseline},
    {"Athlon", CpuCapability::Baseline},        {"Opteron", CpuCapability::Baseline},
    {"Opteron(SSE3)", CpuCapability::Baseline}, {"Opteron_SSE3", CpuCapability::Baseline},
    {"Barcelona", CpuCapability::Baseline},     {"Nano", CpuCapability::Baseline},
    {"Sandybridge", CpuCapability::Baseline},   {"Bobcat", CpuCapability::Baseline},
    {"Bulldozer", CpuCapability::Baseline},     {"Piledriver", CpuCapability::Baseline},
    {"Steamroller", CpuCapability::Baseline},   {"Haswell", CpuCapability::Avx2},
    {"Excavator", CpuCapability::Avx2},         {"Zen", CpuCapability::Avx2},
    {"SkylakeX", CpuCapability::Avx512},        {"Cooperlake", CpuCapability::Avx512},
    {"SapphireRapids", CpuCapability::Avx512},
};

// The best level this CPU can run, whatever levels this build of Ember has: OpenBLAS's kernels
// are not Ember's.
CpuCapability cpu_best() {
  if (cpu_supports(CpuCapability::Avx512)) return CpuCapability::Avx512;
  if (cpu_supports(CpuCapability::Avx2)) return CpuCapability::Avx2;
  return CpuCapability::Baseline;
}

int rank(CpuCapability c) {
  switch (c) {
    case CpuCapability::Avx512:
      return 2;
    case CpuCapability::Avx2:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

namespace detail {

BlasKernels choose_blas_kernels() {
  BlasKernels k;
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  k.name = blas_family_in_use();
  if (env && *env) {
    k.environment = env;
    k.chosen_by = BlasKernelsChooser::Environment;
    return k;
  }
  const std::string better = blas_upgrade(k.name, cpu_best());
  if (better.empty()) return k;
  // OpenBLAS's fallback for a CPU it does not know: load the best family the CPU can run. This
  // runs while libember_core loads (see below), before any Ember kernel or thread exists.
  const std::string picked = k.name;
  const bool took = load_blas_family(better);
  k.name = blas_family_in_use();
  if (took) {
    k.chosen_by = BlasKernelsChooser::Ember;
    k.openblas_pick = picked;
  } else if (k.name != picked) {
    // OpenBLAS refused the family and fell back to another: put its own pick back.
    load_blas_family(picked);
    k.name = blas_family_in_use();
  }
  return k;
}

std::string describe(const BlasKernels& k) {
  switch (k.chosen_by) {
    case BlasKernelsChooser::Environment:
      return k.name + " (OPENBLAS_CORETYPE=" + k.environment + ")";
    case BlasKernelsChooser::Ember:
      return k.name + " (Ember's choice over OpenBLAS's " + k.openblas_pick + ")";
    case BlasKernelsChooser::OpenBlas:
      break;
  }
  return k.name;
}

}  // namespace detail

namespace {

// Made when libember_core loads: after OpenBLAS's own constructor (a library's dependencies are
// initialised first) and, in a program that links Ember, before main and its threads.
[[maybe_unused]] const bool g_chosen_at_load = (blas_kernels(), true);

}  // namespace

const BlasKernels& blas_kernels() {
  static const BlasKernels k = detail::choose_blas_kernels();
  return k;
}

std::string blas_kernels_description() {
  return detail::describe(blas_kernels());
}

bool blas_below_cpu() {
  CpuCapability level;
  if (!detail::blas_family_level(blas_kernels().name, &level)) return false;
  return rank(level) < rank(cpu_best());
}

namespace detail {

bool blas_family_level(const std::string& name, CpuCapability* level) {
  for (const Family& f : kFamilies)
    if (strcasecmp(name.c_str(), f.name) == 0) {
      *level = f.level;
      return true;
    }
  return false;
}

std::string blas_upgrade(const std::string& picked, CpuCapability cpu) {
  CpuCapability level;
  if (!blas_family_level(picked, &level) || rank(level) >= rank(cpu)) return "";
  if (rank(cpu) >= rank(CpuCapability::Avx512)) return "SKYLAKEX";
  if (rank(cpu) >= rank(CpuCapability::Avx2)) return "HASWELL";
  return "";
}

bool blas_family_switchable() {
  return gotoblas_dynamic_quit && gotoblas_dynamic_init;
}

bool load_blas_family(const std::string& name) {
  if (!blas_family_switchable()) return false;
  // OpenBLAS reads the family from OPENBLAS_CORETYPE and nowhere else. The variable is set only
  // for this call and then put back as it was, so child processes (a libtorch reference in the
  // benchmarks, say) still make their own choice.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* old = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = old ? old : "";
  const bool had = old != nullptr;
  ::setenv("OPENBLAS_CORETYPE", name.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (had)
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else
    ::unsetenv("OPENBLAS_CORETYPE");
  // OPENBLAS_CORETYPE is case-insensitive; the core name comes back in OpenBLAS's spelling.
  return strcasecmp(blas_family_in_use().c_str(), name.c_str()) == 0;
}

std::string blas_family_in_use() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

}  // namespace detail
}  // namespace ember
