// Efficiency counters of the kernel emulator (docs/cuda/kernel-report.md): per launch, from the
// addresses that the lanes of each warp touch in one memory instruction, the global-memory
// requests and the 32-byte sectors they touch, the shared-memory wavefronts per request (32 banks
// of 4 bytes), and the share of branches whose lanes went different ways.
//
// The counts need kernels compiled with access hooks: the instrumented build of the kernel files
// (ember_kernels_emu_profiled, cmake/EmberKernelEmulation.cmake) calls a hook before every load
// and store and at every basic block, which the emulator attributes to the running fiber's warp
// and lane. Kernels of the plain emulated build run unchanged and produce empty profiles.
//
//   emu::profile::Session s;          // collect on this host thread while `s` lives
//   ... launch kernels on the device `emu` ...
//   for (const emu::profile::Launch& l : s.launches()) ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ember::emu::profile {

enum class Space : uint8_t { Global, Shared };

// One memory instruction of the kernel (a call site of the hooks), summed over a launch. A request
// is one execution of the instruction by the active lanes of one warp.
struct SiteStats {
  uintptr_t site = 0;    // an instruction of the site (the first seen)
  std::string location;  // "folder/file:line" of the source (a site is a line: see profile.cpp)
  Space space = Space::Global;
  bool store = false;
  uint64_t requests = 0;
  uint64_t lanes = 0;             // active lanes, summed over the requests
  uint64_t bytes = 0;             // distinct bytes the lanes asked for, summed over the requests
  uint64_t sectors = 0;           // global: 32-byte sectors touched
  uint64_t sectors_needed = 0;    // global: ceil(distinct bytes / 32) per request
  uint64_t wavefronts = 0;        // shared: passes through the 32 banks
  uint64_t ideal_wavefronts = 0;  // shared: ceil(distinct bytes / 128) per request
  uint64_t partial = 0;           // requests in which some lane of the warp took no part
};

// Totals of a launch (or of several launches of one kernel, see merge()).
struct Totals {
  SiteStats global_load, global_store, shared_load, shared_store;  // site == 0: sums
  uint64_t branches = 0;                                           // warp executions of basic blocks
  uint64_t divergent_branches = 0;   // ... in which some lane of the warp did not take part
  uint64_t unique_global_bytes = 0;  // 32 x distinct sectors touched by the launch: HBM lower bound
};

struct Launch {
  const void* kernel = nullptr;  // the __global__ function (emu::run_grid's `kernel`)
  std::string stub;              // the dispatch stub whose kernel launched it, if a dispatch was seen
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  size_t dynamic_shared = 0, static_shared = 0;  // bytes per block
  std::vector<SiteStats> sites;
  Totals totals;
};

// Global efficiency (sectors needed / touched, 1 when nothing was touched) and shared wavefronts
// per request, for one SiteStats or a sum.
double global_efficiency(const SiteStats& s);
double wavefronts_per_request(const SiteStats& s);
double excess_wavefronts(const SiteStats& s);  // wavefronts / ideal wavefronts
double divergence(const Totals& t);
void merge(Totals& into, const Totals& t);
void add(SiteStats& into, const SiteStats& s);  // the counts; `into` keeps its site

// Collects profiles of the launches run on this host thread while it lives (sessions nest: the
// innermost collects). Device memory the profile counts as global is the device `emu`'s
// (GuardedAllocator) and what track() names; any other address (kernel arguments, the host
// stack, the fibers' stacks, which hold a CUDA thread's registers and local arrays) is ignored.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const std::vector<Launch>& launches() const { return launches_; }
  std::vector<Launch> take();
  // Names the stub that the next launches belong to (the report sets it from the dispatch
  // observer; empty clears it).
  void set_stub(std::string name) { stub_ = std::move(name); }
  const std::string& stub() const { return stub_; }
  void add(Launch l) { launches_.push_back(std::move(l)); }

 private:
  Session* outer_;
  std::vector<Launch> launches_;
  std::string stub_;
};

// Device memory outside the emulated device's allocator (tests' malloc'ed buffers) that counts as
// global memory; untrack() with the same pointer forgets it.
void track(const void* p, size_t bytes);
void untrack(const void* p);
// Whether the profiled kernels' hooks are linked into this program (false in the plain build).
bool instrumented();
// Ends the calling lane's accesses so far: none of them takes the lane's next access as its
// continuation. The emulated cp.async of one float (core/cuda/cp_async.h) calls it: on a GPU each
// is its own instruction, while a lane's gathers can be adjacent (two taps of one input row) and
// would read as one vector access the host compiler split. Without a session it returns at once.
void end_vector_access();

namespace detail {
// Called by the emulator (core/cuda/emu/emu.cpp, guarded_allocator.cpp): without a session (or, for the
// allocations, without the hooks linked) each returns at once.
bool active();
void launch_begin(const void* kernel, const unsigned grid[3], const unsigned block[3], size_t dynamic_shared);
void launch_end();
void block_begin(unsigned threads, const void* dynamic, size_t dynamic_bytes);
void block_end();
void shared_allocated(const void* p, size_t bytes, bool is_static);
void fiber_switch();  // the running fiber reaches a switch point or exits
void device_allocated(const void* p, size_t bytes);
void device_freed(const void* p);
// From the hooks (core/cuda/emu/instrument/hooks.cpp).
void access(uintptr_t addr, unsigned size, bool store, uintptr_t site);
void basic_block(uintptr_t site);
extern bool g_hooks_linked;
}  // namespace detail

}  // namespace ember::emu::profile
