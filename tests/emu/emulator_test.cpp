// The kernel emulator itself: thread coordinates, barriers, warp collectives, shared memory and
// the bugs it exists to catch. The planted-bug kernels here are wrong on purpose: a missing
// __syncthreads must give a wrong answer in at least one thread order, a barrier inside a branch
// and a collective whose lanes never arrive must be reported with file:line.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/copy.h"
#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/sanitizers.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::all_orders;
using emu_test::ThreadOrder;
using test_util::error_of;
using test_util::has;

namespace {

const std::string kFile = "emulator_test.cpp:";

std::string at_line(int line) {
  return kFile + std::to_string(line);
}

template <typename... K, typename... A>
void run(void (*k)(K...), dim3 grid, dim3 block, size_t shared, A&&... args) {
  cuda::launch(k, grid, block, shared, nullptr, std::forward<A>(args)...);
}

// ------------------------------------------------------------------ kernels
__global__ void coordinates(int* out) {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  out[b * nt + t] = static_cast<int>(1000 * b + t);
}

// Block sum by a shared-memory tree; `barrier` false plants the classic missing __syncthreads.
template <bool barrier>
__global__ void block_sum(const float* in, float* out) {
  EMBER_SHARED(float, s, [128]);
  const unsigned t = threadIdx.x;
  s[t] = in[blockIdx.x * 128 + t];
  if constexpr (barrier) __syncthreads();
  for (unsigned stride = 64; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    if constexpr (barrier) __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Warp sum through shuffles (correct), and through shared memory relying on lockstep (wrong).
__global__ void warp_sum_shfl(const float* in, float* out) {
  float v = in[threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[threadIdx.x] = v;
}
__global__ void warp_sum_lockstep(const float* in, float* out) {
  EMBER_SHARED(float, s, [32]);
  const unsigned t = threadIdx.x;
  s[t] = in[t];
  // Missing __syncwarp between the steps: correct only if the 32 lanes ran in lockstep.
  for (unsigned o = 16; o > 0; o /= 2)
    if (t < o) s[t] += s[t + o];
  if (t == 0) out[0] = s[0];
}

__global__ void barrier_in_branch(float* out) {
  if (threadIdx.x < 16) {
    __syncthreads();  // the planted bug: half the block skips this barrier
  }
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}
constexpr int kBranchBarrierLine = __LINE__ - 5;

__global__ void shuffle_missing_lanes(float* out) {
  float v = out[threadIdx.x];
  if (threadIdx.x % 32 < 16) {
    v = __shfl_down_sync(0xffffffffu, v, 1);  // lanes 16..31 are named but never arrive
  }
  out[threadIdx.x] = v;
}
constexpr int kShuffleMissingLine = __LINE__ - 4;

__global__ void shuffle_vs_barrier(float* out) {
  float v = out[threadIdx.x];
  if (threadIdx.x < 8) v = __shfl_sync(0xffu, v, 0);  // an exact mask: fine
  if (threadIdx.x < 16) {
    v = __shfl_sync(0xffffffffu, v, 0);  // names lanes 16..31, which wait at the barrier below
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = v;
}
constexpr int kShuffleVsBarrierLine = __LINE__ - 6;

__global__ void full_mask_on_partial_warp(float* out) {
  out[threadIdx.x] = __shfl_sync(0xffffffffu, out[threadIdx.x], 0);
}

__global__ void collectives(const int* in, unsigned* ballot, int* any, int* all, float* up, float* down, float* seg) {
  const unsigned t = threadIdx.x;
  const int p = in[t];
  ballot[t] = __ballot_sync(0xffffffffu, p);
  any[t] = __any_sync(0xffffffffu, p);
  all[t] = __all_sync(0xffffffffu, p);
  up[t] = __shfl_up_sync(0xffffffffu, static_cast<float>(t), 3);
  down[t] = __shfl_down_sync(0xffffffffu, static_cast<float>(t), 5, 8);
  seg[t] = __shfl_sync(0xffffffffu, static_cast<float>(t), 2, 16);
  __syncwarp();
}

__global__ void read_uninitialised_shared(float* out) {
  EMBER_SHARED(float, s, [4]);
  if (blockIdx.x == 0) s[threadIdx.x] = 5.0f;
  __syncthreads();
  out[blockIdx.x * 4 + threadIdx.x] = s[threadIdx.x];  // block 1 never wrote: poison
}

__global__ void dynamic_reverse(const int* in, int* out, int n) {
  EMBER_DYNAMIC_SHARED(int, s);
  const int t = static_cast<int>(threadIdx.x);
  if (t < n) s[t] = in[t];
  __syncthreads();
  if (t < n) out[t] = s[n - 1 - t];
}

__global__ void barrier_counts(const int* in, int* out) {
  const int p = in[threadIdx.x];
  out[0 * 64 + threadIdx.x] = __syncthreads_count(p);
  out[1 * 64 + threadIdx.x] = __syncthreads_and(p);
  out[2 * 64 + threadIdx.x] = __syncthreads_or(p);
}

__global__ void throws_in_thread_5(float* out) {
  __syncthreads();
  EMBER_CHECK(threadIdx.x != 5, "device-side check failed in thread ", threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void deep_recursion_probe(int* out, int depth) {
  volatile char buf[1024];
  buf[0] = static_cast<char>(depth);
  out[threadIdx.x] = depth + buf[0] - depth;
}

std::vector<float> iota_floats(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  return v;
}

class Emulator : public emu_test::EmulatedKernel {};

}  // namespace

TEST_P(Emulator, CoordinatesCoverTheGrid) {
  std::vector<int> out(6 * 24, -1);
  run(coordinates, dim3(3, 2), dim3(4, 3, 2), 0, out.data());
  for (int b = 0; b < 6; ++b)
    for (int t = 0; t < 24; ++t) EXPECT_EQ(out[b * 24 + t], 1000 * b + t);
}

TEST_P(Emulator, BlockSumWithBarriersIsRight) {
  const std::vector<float> in = iota_floats(256);
  std::vector<float> out(2, 0.0f);
  run(block_sum<true>, 2, 128, 0, in.data(), out.data());
  for (int b = 0; b < 2; ++b) {
    float want = 0;
    for (int i = 0; i < 128; ++i) want += in[b * 128 + i];
    EXPECT_FLOAT_EQ(out[b], want);
  }
}

TEST_P(Emulator, WarpShuffleSumIsRight) {
  const std::vector<float> in = iota_floats(32);
  std::vector<float> out(32);
  run(warp_sum_shfl, 1, 32, 0, in.data(), out.data());
  float want = 0;
  for (float x : in) want += x;
  for (float x : out) EXPECT_FLOAT_EQ(x, want);
}

TEST_P(Emulator, VotesAndShuffleVariants) {
  std::vector<int> in(32);
  for (int i = 0; i < 32; ++i) in[i] = (i % 3 == 0);
  std::vector<unsigned> ballot(32);
  std::vector<int> any(32), all(32);
  std::vector<float> up(32), down(32), seg(32);
  run(collectives, 1, 32, 0, in.data(), ballot.data(), any.data(), all.data(), up.data(), down.data(), seg.data());
  unsigned want = 0;
  for (int i = 0; i < 32; ++i) want |= (i % 3 == 0 ? 1u : 0u) << i;
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(ballot[i], want);
    EXPECT_EQ(any[i], 1);
    EXPECT_EQ(all[i], 0);
    EXPECT_EQ(up[i], i >= 3 ? i - 3 : i);
    EXPECT_EQ(down[i], i % 8 + 5 < 8 ? i + 5 : i) << i;  // width 8: no crossing into the next group
    EXPECT_EQ(seg[i], (i / 16) * 16 + 2);
  }
}

TEST_P(Emulator, BarrierCountAndOr) {
  std::vector<int> in(64), out(3 * 64, -1);
  for (int i = 0; i < 64; ++i) in[i] = i % 4 == 1;
  run(barrier_counts, 1, 64, 0, in.data(), out.data());
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(out[i], 16);
    EXPECT_EQ(out[64 + i], 0);
    EXPECT_EQ(out[128 + i], 1);
  }
}

TEST_P(Emulator, DynamicSharedMemoryHasTheLaunchSize) {
  std::vector<int> in = {1, 2, 3, 4, 5, 6, 7}, out(7, 0);
  run(dynamic_reverse, 1, 8, 7 * sizeof(int), in.data(), out.data(), 7);
  EXPECT_EQ(out, (std::vector<int>{7, 6, 5, 4, 3, 2, 1}));
}

TEST_P(Emulator, SharedMemoryIsPoisonedPerBlock) {
  std::vector<float> out(8, 0.0f);
  run(read_uninitialised_shared, 2, 4, 0, out.data());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], 5.0f);
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(out[i])) << "block 1 saw block 0's shared memory: " << out[i];
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Emulator, testing::ValuesIn(all_orders()), emu_test::order_name);

// ------------------------------------------------------------------ planted bugs
TEST(EmulatorPlantedBugs, MissingSyncthreadsGivesAWrongAnswerInSomeOrder) {
  const std::vector<float> in = iota_floats(128);
  float want = 0;
  for (float x : in) want += x;
  int wrong = 0;
  for (const auto& c : all_orders()) {
    emu::ScopedOptions scope(c.order, c.seed);
    float out = 0;
    run(block_sum<false>, 1, 128, 0, in.data(), &out);
    if (!(out == want)) ++wrong;
  }
  EXPECT_GE(wrong, 1) << "a block reduction without barriers passed in every thread order";
}

TEST(EmulatorPlantedBugs, LockstepWarpReductionGivesAWrongAnswerInSomeOrder) {
  const std::vector<float> in = iota_floats(32);
  float want = 0;
  for (float x : in) want += x;
  int wrong = 0;
  for (const auto& c : all_orders()) {
    emu::ScopedOptions scope(c.order, c.seed);
    float out = 0;
    run(warp_sum_lockstep, 1, 32, 0, in.data(), &out);
    if (!(out == want)) ++wrong;
  }
  EXPECT_GE(wrong, 1);
}

TEST(EmulatorPlantedBugs, BarrierInsideABranchIsReportedWithFileAndLine) {
  for (const auto& c : all_orders()) {
    emu::ScopedOptions scope(c.order, c.seed);
    std::vector<float> out(32);
    const std::string msg = error_of([&] { run(barrier_in_branch, 1, 32, 0, out.data()); });
    EXPECT_TRUE(has(msg, "divergent __syncthreads")) << msg;
    EXPECT_TRUE(has(msg, at_line(kBranchBarrierLine))) << msg;
    EXPECT_TRUE(has(msg, at_line(kBranchBarrierLine + 2))) << msg;
  }
}

TEST(EmulatorPlantedBugs, CollectiveWithLanesThatNeverArriveIsReported) {
  for (const auto& c : all_orders()) {
    emu::ScopedOptions scope(c.order, c.seed);
    std::vector<float> out(32, 1.0f);
    const std::string msg = error_of([&] { run(shuffle_missing_lanes, 1, 32, 0, out.data()); });
    EXPECT_TRUE(has(msg, "__shfl_down_sync at ")) << msg;
    EXPECT_TRUE(has(msg, at_line(kShuffleMissingLine) + " ")) << msg;
    EXPECT_TRUE(has(msg, "never arrives")) << msg;
    EXPECT_TRUE(has(msg, "has exited")) << msg;
  }
}

TEST(EmulatorPlantedBugs, CollectiveWaitingOnLanesAtABarrierIsReported) {
  std::vector<float> out(32, 1.0f);
  const std::string msg = error_of([&] { run(shuffle_vs_barrier, 1, 32, 0, out.data()); });
  EXPECT_TRUE(has(msg, "__shfl_sync at ")) << msg;
  EXPECT_TRUE(has(msg, at_line(kShuffleVsBarrierLine) + " ")) << msg;
  EXPECT_TRUE(has(msg, "never arrives: it waits at __syncthreads at ")) << msg;
  EXPECT_TRUE(has(msg, at_line(kShuffleVsBarrierLine + 2))) << msg;
}

TEST(EmulatorPlantedBugs, MaskNamingLanesOutsideThePartialWarpIsReported) {
  std::vector<float> out(48, 1.0f);
  const std::string msg = error_of([&] { run(full_mask_on_partial_warp, 1, 48, 0, out.data()); });
  EXPECT_TRUE(has(msg, "does not exist")) << msg;
  EXPECT_TRUE(has(msg, kFile)) << msg;
}

TEST(EmulatorPlantedBugs, AnErrorInOneThreadUnwindsTheBlockAndPropagates) {
  std::vector<float> out(64, 0.0f);
  const std::string msg = error_of([&] { run(throws_in_thread_5, 2, 64, 0, out.data()); });
  EXPECT_TRUE(has(msg, "device-side check failed in thread 5")) << msg;
  // The emulator is usable again afterwards.
  std::vector<int> c(24, -1);
  run(coordinates, 1, dim3(4, 3, 2), 0, c.data());
  EXPECT_EQ(c[23], 23);
}

TEST(Emulator, LaunchConfigurationIsChecked) {
  std::vector<float> out(2048);
  EXPECT_TRUE(has(error_of([&] { run(full_mask_on_partial_warp, 1, 1025, 0, out.data()); }), "1 to 1024 threads"));
  EXPECT_TRUE(has(error_of([&] { run(full_mask_on_partial_warp, 0, 32, 0, out.data()); }), "invalid grid"));
  EXPECT_TRUE(has(error_of([&] { run(dynamic_reverse, 1, 8, 300 * 1024, nullptr, nullptr, 0); }), "227 KiB"));
  EXPECT_TRUE(has(error_of([] { __syncthreads(); }), "outside a kernel"));
}

TEST(Emulator, StackSizeIsConfigurable) {
  emu::Options o;
  o.stack_bytes = 16 * 1024;
  emu::ScopedOptions scope(o);
  std::vector<int> out(64, 0);
  run(deep_recursion_probe, 1, 64, 0, out.data(), 3);
  for (int x : out) EXPECT_EQ(x, 3);
}

TEST(Emulator, CountsLaunchesBlocksAndSwitches) {
  const emu::Stats before = emu::stats();
  const std::vector<float> in = iota_floats(256);
  std::vector<float> out(2);
  run(block_sum<true>, 2, 128, 0, in.data(), out.data());
  const emu::Stats after = emu::stats();
  EXPECT_EQ(after.launches - before.launches, 1u);
  EXPECT_EQ(after.blocks - before.blocks, 2u);
  EXPECT_EQ(after.threads - before.threads, 256u);
  EXPECT_EQ(after.switches - before.switches, 2u * 128u * 8u);  // 8 barriers per thread
}

// A dry run checks and counts the launch but runs no thread (the kernel report's targets, shapes too
// large to emulate): the output stays as it was, no block is counted.
TEST(Emulator, DryRunCountsTheLaunchAndRunsNoThread) {
  const std::vector<float> in = iota_floats(256);
  std::vector<float> out(2, -1.0f);
  emu::Options o = emu::options();
  o.dry_run = true;
  {
    emu::ScopedOptions dry(o);
    const emu::Stats before = emu::stats();
    run(block_sum<true>, 2, 128, 0, in.data(), out.data());
    const emu::Stats after = emu::stats();
    EXPECT_EQ(after.launches - before.launches, 1u);
    EXPECT_EQ(after.blocks - before.blocks, 0u);
    EXPECT_EQ(out, std::vector<float>(2, -1.0f));
    EXPECT_THROW(run(block_sum<true>, 2, 2048, 0, in.data(), out.data()), Error);  // still checked
  }
  run(block_sum<true>, 2, 128, 0, in.data(), out.data());  // the option is scoped
  EXPECT_NE(out[0], -1.0f);
}

// emu::kernel(stub) is a kernel call on the emulated device for the dispatch observer, as a call
// through the device `emu` is (the coverage counts of tests/emu and tests/ops add up).
namespace {
const void* g_seen_stub = nullptr;
DeviceType g_seen_type = DeviceType::CPU;
void see(const void* stub, DeviceType t, int) {
  g_seen_stub = stub;
  g_seen_type = t;
}
}  // namespace

TEST(Emulator, KernelLookupsReachTheDispatchObserver) {
  set_dispatch_observer(&see);
  auto* k = emu::kernel(fill_stub);
  set_dispatch_observer(nullptr);
  EXPECT_NE(k, nullptr);
  EXPECT_EQ(g_seen_stub, static_cast<const void*>(&fill_stub));
  EXPECT_EQ(g_seen_type, DeviceType::Emulated);
}

// Only an AddressSanitizer build can see an out-of-bounds access; there the emulator's exact-size
// "device" memory and dynamic shared memory turn one into a report naming the kernel's line.
#if EMBER_ASAN
namespace {
__global__ void writes_one_past_the_end(float* out) {
  out[threadIdx.x] = 1.0f;
}
__global__ void dynamic_shared_overrun(int* out) {
  EMBER_DYNAMIC_SHARED(int, s);
  s[threadIdx.x] = 1;  // 8 threads, 7 ints of dynamic shared memory
  __syncthreads();
  out[threadIdx.x] = s[0];
}
}  // namespace

TEST(EmulatorDeathTest, AddressSanitizerCatchesOutOfBoundsKernelAccesses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Tensor out = emu_test::device_empty({32}, DType::Float32);
        run(writes_one_past_the_end, 1, 33, 0, out.data_ptr<float>());
      },
      "heap-buffer-overflow.*writes_one_past_the_end");
  EXPECT_DEATH(
      {
        std::vector<int> out(8);
        run(dynamic_shared_overrun, 1, 8, 7 * sizeof(int), out.data());
      },
      "heap-buffer-overflow.*dynamic_shared_overrun");
}
#endif
