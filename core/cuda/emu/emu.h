// The CUDA device API for the host compiler: Ember's kernel emulation layer (see
// docs/cuda/emulation.md and ../shared/KERNELS.md). A kernel file includes
// core/cuda/device_api.h, which under nvcc is the real CUDA runtime and under the host compiler
// is this header, so the same kernel source runs on a GPU and, in CI, on the CPU: every CUDA
// thread of a block is a Boost.Context fiber, blocks run one after another, and __syncthreads
// and the _sync warp collectives are the points where fibers switch. A barrier reached from two
// call sites, or a collective whose lanes never arrive, throws ember::Error naming file:line
// instead of hanging; shared memory is poisoned (0xFF bytes: NaN floats, -1 integers) before
// every block; the order in which fibers run is forward, reverse or seeded random
// (set_thread_order), so code that relies on lockstep or misses a barrier gives a wrong answer in
// at least one order.
//
// Never include this header directly; never use it outside kernel files and their tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <type_traits>

#include "core/dispatch.h"

// ------------------------------------------------------------------ types the runtime names
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};
struct uint3 {
  unsigned x, y, z;
};
struct CUstream_emu;
using cudaStream_t = CUstream_emu*;

// Vector types with CUDA's alignment, so that 16-byte vector loads fault on a misaligned pointer
// under UBSan exactly where they would on a GPU.
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) {
  return {x, y};
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
inline double2 make_double2(double x, double y) {
  return {x, y};
}
inline uint2 make_uint2(unsigned x, unsigned y) {
  return {x, y};
}

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// A plain `__shared__` declaration cannot be made per block in host C++: declare static shared
// memory with EMBER_SHARED and dynamic shared memory with EMBER_DYNAMIC_SHARED instead.
#define __shared__ static_assert(false, "kernel emulation: declare shared memory with EMBER_SHARED");
#define __constant__ static_assert(false, "kernel emulation: __constant__ memory is not supported");

namespace ember::emu {

// Where in a kernel's source a barrier or a __shared__ declaration is, captured at the call site:
// std::source_location where the standard library has it; with clang before 15 (Debian 12 ships
// 14), whose libstdc++ <source_location> is empty without the compiler's support, a stand-in
// built on the older builtins, which clang has (GCC lacks __builtin_COLUMN, but has the real one).
#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE(),
                                          unsigned column = __builtin_COLUMN()) {
    SourceLocation w;
    w.file_ = file;
    w.line_ = line;
    w.column_ = column;
    return w;
  }
  constexpr const char* file_name() const { return file_; }
  constexpr unsigned line() const { return line_; }
  constexpr unsigned column() const { return column_; }

 private:
  const char* file_ = "";
  unsigned line_ = 0, column_ = 0;
};
#endif

// The order in which the fibers of a block are resumed at every round.
enum class ThreadOrder { Forward, Reverse, Random };
const char* thread_order_name(ThreadOrder order);

struct Options {
  ThreadOrder order = ThreadOrder::Forward;
  uint64_t seed = 0;               // for ThreadOrder::Random
  size_t stack_bytes = 64 * 1024;  // per fiber, plus a guard page
  // Launches are checked, counted and recorded (grid, block, kernel: core/cuda/emu/profile.h) but no
  // thread runs: what a call would launch, on shapes far too large to emulate (the kernel report's
  // targets). Nothing is written, so outputs are garbage.
  bool dry_run = false;
};
// Per host thread (tests may run emulated launches from several threads independently).
Options& options();
void set_thread_order(ThreadOrder order, uint64_t seed = 0);

// Sets the order (and optionally the stack size) for a scope.
class ScopedOptions {
 public:
  explicit ScopedOptions(ThreadOrder order, uint64_t seed = 0) : saved_(options()) {
    options().order = order;
    options().seed = seed;
  }
  explicit ScopedOptions(Options o) : saved_(options()) { options() = o; }
  ~ScopedOptions() { options() = saved_; }
  ScopedOptions(const ScopedOptions&) = delete;
  ScopedOptions& operator=(const ScopedOptions&) = delete;

 private:
  Options saved_;
};

// Counters of the emulator's work (for tests and to keep the emulated suite's sizes honest).
struct Stats {
  uint64_t launches = 0, blocks = 0, threads = 0, switches = 0;
};
Stats& stats();

// Runs `body` once per CUDA thread of every block of the grid (what launch() calls). `kernel`
// names the __global__ function for the efficiency counters (core/cuda/emu/profile.h).
void run_grid(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body,
              const void* kernel = nullptr);

// ------------------------------------------------------------------ the emulated kernels
// Kernel files register their host entry points with EMBER_REGISTER_KERNEL(stub, CUDA, fn); under
// nvcc that fills the stub's CUDA slot, under emulation its Emulated slot (core/cuda/device_api.h).
// Tests run them through ops on the device `emu` (core/cuda/emu/emu_device.cpp), or call one
// kernel with host tensors through emu::kernel(stub), which the dispatch observer
// (core/dispatch.h) sees as a call on DeviceType::Emulated, as it sees the device's calls.
template <typename Fn>
Fn* kernel(const DispatchStub<Fn>& stub) {
  Fn* f = stub.table[static_cast<int>(DeviceType::Emulated)];
  EMBER_CHECK(f, stub.name, ": no emulated CUDA kernel is registered");
  if (::ember::detail::g_dispatch_observer) ::ember::detail::g_dispatch_observer(&stub, DeviceType::Emulated, -1);
  return f;
}

namespace detail {

// The executing fiber's coordinates, set by the scheduler before every switch into a fiber.
extern thread_local uint3 tls_thread_idx;
extern thread_local uint3 tls_block_idx;
extern thread_local dim3 tls_block_dim;
extern thread_local dim3 tls_grid_dim;

enum class Collective { Shfl, ShflUp, ShflDown, ShflXor, Ballot, Any, All, SyncWarp };
// Deposits this lane's value (size <= 16 bytes) and waits for every lane of `mask`; returns the
// result in `value` (the shuffled value, or the ballot/any/all word in its first 4 bytes).
void warp_collective(Collective op, unsigned mask, int arg, int width, void* value, size_t size,
                     const ::ember::emu::SourceLocation& where);
// The block barrier; returns the number of threads whose predicate was nonzero.
int block_barrier(int predicate, const ::ember::emu::SourceLocation& where);
// Static shared memory: one buffer per block and declaration site (and type), poisoned.
void* static_shared(const void* type_tag, size_t bytes, size_t align, const ::ember::emu::SourceLocation& where);
void* dynamic_shared();
template <typename T>
inline const char type_tag = 0;

template <typename T>
T shuffle(Collective op, unsigned mask, T var, int arg, int width, const ::ember::emu::SourceLocation& where) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "warp shuffles move values of up to 16 bytes");
  alignas(16) unsigned char buf[16] = {};
  std::memcpy(buf, &var, sizeof(T));
  warp_collective(op, mask, arg, width, buf, sizeof(T), where);
  T out;
  std::memcpy(&out, buf, sizeof(T));
  return out;
}

inline unsigned vote(Collective op, unsigned mask, int predicate, const ::ember::emu::SourceLocation& where) {
  alignas(16) unsigned char buf[16] = {};
  const unsigned p = predicate != 0;
  std::memcpy(buf, &p, sizeof p);
  warp_collective(op, mask, 0, 32, buf, sizeof p, where);
  unsigned out;
  std::memcpy(&out, buf, sizeof out);
  return out;
}

}  // namespace detail
}  // namespace ember::emu

// ------------------------------------------------------------------ built-in variables
#define threadIdx (::ember::emu::detail::tls_thread_idx)
#define blockIdx (::ember::emu::detail::tls_block_idx)
#define blockDim (::ember::emu::detail::tls_block_dim)
#define gridDim (::ember::emu::detail::tls_grid_dim)
constexpr int warpSize = 32;

// ------------------------------------------------------------------ shared memory
// EMBER_SHARED(float, tile, [32][33]) is `__shared__ float tile[32][33]` on a GPU; here `tile` is a
// reference to the block's array for that declaration.
#define EMBER_SHARED(type, name, dims)                                         \
  auto& name = *static_cast<type(*) dims>(::ember::emu::detail::static_shared( \
      &::ember::emu::detail::type_tag<type dims>, sizeof(type dims),           \
      alignof(type dims) < 16 ? 16 : alignof(type dims), ::ember::emu::SourceLocation::current()))
// EMBER_DYNAMIC_SHARED(float, buf): `buf` points at the launch's dynamic shared memory (16-byte
// aligned, exactly the bytes the launch asked for).
#define EMBER_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::ember::emu::detail::dynamic_shared())

// ------------------------------------------------------------------ barriers and warp collectives
inline void __syncthreads(const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  ::ember::emu::detail::block_barrier(0, where);
}
inline int __syncthreads_count(int predicate,
                               const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::block_barrier(predicate, where);
}
inline int __syncthreads_and(int predicate,
                             const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::block_barrier(predicate, where) ==
         static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int predicate,
                            const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::block_barrier(predicate, where) != 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  ::ember::emu::detail::vote(::ember::emu::detail::Collective::SyncWarp, mask, 0, where);
}
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::shuffle(::ember::emu::detail::Collective::Shfl, mask, var, src_lane, width, where);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::shuffle(::ember::emu::detail::Collective::ShflUp, mask, var, static_cast<int>(delta),
                                       width, where);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::shuffle(::ember::emu::detail::Collective::ShflDown, mask, var, static_cast<int>(delta),
                                       width, where);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::shuffle(::ember::emu::detail::Collective::ShflXor, mask, var, lane_mask, width, where);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return ::ember::emu::detail::vote(::ember::emu::detail::Collective::Ballot, mask, predicate, where);
}
inline int __any_sync(unsigned mask, int predicate,
                      const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return static_cast<int>(::ember::emu::detail::vote(::ember::emu::detail::Collective::Any, mask, predicate, where));
}
inline int __all_sync(unsigned mask, int predicate,
                      const ::ember::emu::SourceLocation& where = ::ember::emu::SourceLocation::current()) {
  return static_cast<int>(::ember::emu::detail::vote(::ember::emu::detail::Collective::All, mask, predicate, where));
}
inline void __threadfence() {}
inline void __threadfence_block() {}

// ------------------------------------------------------------------ atomics
// A fiber never switches inside an atomic and a block runs on one host thread, so plain
// read-modify-writes are atomic here.
template <typename T>
T atomicAdd(T* address, T val) {
  T old = *address;
  *address = static_cast<T>(old + val);
  return old;
}
template <typename T>
T atomicSub(T* address, T val) {
  T old = *address;
  *address = static_cast<T>(old - val);
  return old;
}
template <typename T>
T atomicExch(T* address, T val) {
  T old = *address;
  *address = val;
  return old;
}
template <typename T>
T atomicMax(T* address, T val) {
  T old = *address;
  if (val > old) *address = val;
  return old;
}
template <typename T>
T atomicMin(T* address, T val) {
  T old = *address;
  if (val < old) *address = val;
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T val) {
  T old = *address;
  if (old == compare) *address = val;
  return old;
}
template <typename T>
T atomicAnd(T* address, T val) {
  T old = *address;
  *address = old & val;
  return old;
}
template <typename T>
T atomicOr(T* address, T val) {
  T old = *address;
  *address = old | val;
  return old;
}

// ------------------------------------------------------------------ math intrinsics
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __log2f(float x) {
  return std::log2(x);
}
inline float __sinf(float x) {
  return std::sin(x);
}
inline float __cosf(float x) {
  return std::cos(x);
}
inline float __tanf(float x) {
  return std::tan(x);
}
inline float __powf(float x, float y) {
  return std::pow(x, y);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return std::sqrt(x);
}
inline float __saturatef(float x) {
  return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x));
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float __fmaf_rn(float a, float b, float c) {
  return std::fma(a, b, c);
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline unsigned __float_as_uint(float x) {
  unsigned i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline float __uint_as_float(unsigned i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline long long __double_as_longlong(double x) {
  long long i;
  std::memcpy(&i, &x, 8);
  return i;
}
inline double __longlong_as_double(long long i) {
  double x;
  std::memcpy(&x, &i, 8);
  return x;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
  return __builtin_popcountll(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}
// CUDA's device-side overloads of the C math functions (expf, fmaxf, ...) are the host's <cmath>
// ones here; the global-namespace float names come from <math.h>.
using std::fmaf;
