// Which implementation of an op family runs on a device that has two: Ember's own kernels
// ("native") or the vendor library's (cuBLAS for GEMM, cuDNN for convolution, pooling, batch norm
// and the recurrent layers). The choice is per family, from the environment
//     EMBER_KERNELS=native|vendor|auto            (every family)
//     EMBER_KERNELS=gemm=native,conv=auto,...     (per family; unnamed families keep the default)
// or from set_kernel_choice(). `auto` (the default) runs both once for each new shape, times them
// and keeps the faster for that shape. set_deterministic(true) removes every implementation that
// is not bitwise reproducible run to run (float atomics in reductions over a batch, cuDNN's
// non-deterministic algorithms) from the candidates, whatever the choice says.
//
// The logic lives in core, device-independent, so that it is tested on the CPU with fake timed
// candidates; the CUDA backend supplies real candidates and a CUDA-event timer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace ember {

enum class KernelChoice : uint8_t { Native, Vendor, Auto };
enum class KernelFamily : uint8_t { Gemm, Conv, Pool, BatchNorm, Rnn };
inline constexpr int kNumKernelFamilies = 5;

const char* kernel_family_name(KernelFamily f);          // "gemm", "conv", "pool", "batch_norm", "rnn"
const char* kernel_choice_name(KernelChoice c);          // "native", "vendor", "auto"
KernelChoice parse_kernel_choice(const std::string& s);  // ember::Error naming s otherwise
KernelFamily parse_kernel_family(const std::string& s);

// The current choice for a family (EMBER_KERNELS is read on first use).
KernelChoice kernel_choice(KernelFamily f);
void set_kernel_choice(KernelFamily f, KernelChoice c);
// Applies a spec in EMBER_KERNELS's syntax; an invalid spec changes nothing and throws.
void set_kernel_choices(const std::string& spec);

// Backends declare the vendor implementations they were built with (cuBLAS: gemm; cuDNN: conv),
// so programs can say "n/a" instead of timing a fallback.
void register_vendor(KernelFamily f);
bool has_vendor(KernelFamily f);

// Native kernels of these families register by stub (core/cuda/native_kernels.h wraps this with
// the stub's function type); the entry of a stub with none has fn == nullptr.
struct NativeEntry {
  void* fn = nullptr;
  bool deterministic = true;
};
NativeEntry& native_entry(const void* stub, KernelFamily f);
bool has_native(KernelFamily f);  // a native kernel of the family is registered

void set_deterministic(bool on);
bool deterministic();

// One implementation offered to the selector.
struct KernelCandidate {
  bool available = false;     // registered / linked / supports these arguments
  bool deterministic = true;  // bitwise reproducible run to run
  std::function<void()> run;  // does the whole op once
};

// Measures one run of `fn` (any unit, smaller is faster). On CUDA: events around the launch on
// the current stream.
using KernelTimer = std::function<double(const std::function<void()>& fn)>;

enum class KernelPick : uint8_t { Native, Vendor };

// Chooses and runs, and remembers `auto`'s timings per (family, shape key). Thread-safe.
class KernelSelector {
 public:
  // Runs the op once with the chosen candidate and says which one ran. Under `auto`, a shape
  // seen for the first time is timed when `may_time` (the op can run again without changing its
  // result, i.e. it overwrites its outputs): each candidate runs once to warm up (lazy library
  // initialisation, autotuning) and once under `timer`; the faster is cached and the output is
  // that of the last run. When it may not be timed, the vendor candidate runs and nothing is
  // cached. Throws an ember::Error naming the family and key when no candidate may run.
  KernelPick run(KernelFamily family, const std::string& key, const KernelCandidate& native,
                 const KernelCandidate& vendor, const KernelTimer& timer, bool may_time = true);

  // The cached `auto` decision for a key, if any.
  std::optional<KernelPick> cached(KernelFamily family, const std::string& key) const;
  void clear();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<KernelFamily, std::string>, KernelPick> cache_;
};

// The process-wide selector that backends use.
KernelSelector& kernel_selector();

namespace detail {
// Re-reads choices from `env` (as if EMBER_KERNELS held it; null = unset) and resets the
// deterministic flag; for tests.
void reset_kernel_choices(const char* env);
}  // namespace detail

}  // namespace ember
