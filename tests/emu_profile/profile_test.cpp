// The emulator's efficiency counters on hand-written kernels whose answers are known by hand
// (hand_kernels.h): sectors of coalesced, strided, vector and misaligned accesses, shared-memory
// wavefronts with and without bank conflicts, and divergence.
#include "core/cuda/emu/profile.h"

#include <gtest/gtest.h>

#include "core/cuda/emu/emu_device.h"
#include "core/ops.h"
#include "emu_profile/hand_kernels.h"

namespace profile = ember::emu::profile;
using ember::Tensor;

namespace {

Tensor device_floats(int64_t n) {
  return ember::arange(static_cast<double>(n), {.dtype = ember::DType::Float32}).to(ember::emu::device());
}
const float* in_ptr(const Tensor& t) {
  return static_cast<const float*>(t.raw_data());
}
float* out_ptr(Tensor& t) {
  return static_cast<float*>(t.raw_data());
}

// The totals of the one launch that `run` makes.
template <typename F>
profile::Totals one_launch(F run) {
  profile::Session s;
  run();
  EXPECT_EQ(s.launches().size(), 1u);
  return s.launches().empty() ? profile::Totals{} : s.launches()[0].totals;
}

}  // namespace

TEST(EmuProfile, HooksAreLinked) {
  EXPECT_TRUE(profile::instrumented());
}

// 1024 floats, 256 threads per block: 32 warps each read and write 128 contiguous bytes, 4 sectors.
TEST(EmuProfile, CoalescedCopyTouchesFourSectorsPerRequest) {
  Tensor in = device_floats(1024), out = device_floats(1024);
  const profile::Totals t = one_launch([&] { hand::copy(in_ptr(in), out_ptr(out), 1024); });
  EXPECT_EQ(t.global_load.requests, 32u);
  EXPECT_EQ(t.global_load.sectors, 128u);
  EXPECT_EQ(t.global_load.sectors_needed, 128u);
  EXPECT_EQ(t.global_store.requests, 32u);
  EXPECT_EQ(t.global_store.sectors, 128u);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_load), 1.0);
  EXPECT_EQ(t.global_load.partial, 0u);
  EXPECT_EQ(t.divergent_branches, 0u);
  EXPECT_GT(t.branches, 0u);
  EXPECT_EQ(t.unique_global_bytes, 2u * 4096);
  EXPECT_EQ(t.shared_load.requests + t.shared_store.requests, 0u);
}

// Lane i reads element 32 i: each lane its own sector, 32 per request where 4 would do.
TEST(EmuProfile, StrideThirtyTwoReadTouchesASectorPerLane) {
  Tensor in = device_floats(1024 * 32), out = device_floats(1024);
  const profile::Totals t = one_launch([&] { hand::strided_read(in_ptr(in), out_ptr(out), 1024, 32); });
  EXPECT_EQ(t.global_load.requests, 32u);
  EXPECT_EQ(t.global_load.sectors, 32u * 32);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_load), 0.125);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_store), 1.0);
}

// One float4 per lane is one request of 512 bytes (16 sectors), though the host compiler may
// split the load into four.
TEST(EmuProfile, VectorLoadIsOneRequest) {
  Tensor in = device_floats(4096), out = device_floats(4096);
  const profile::Totals t = one_launch([&] { hand::copy_vec4(in_ptr(in), out_ptr(out), 4096); });
  EXPECT_EQ(t.global_load.requests, 32u);
  EXPECT_EQ(t.global_load.sectors, 32u * 16);
  EXPECT_EQ(t.global_store.requests, 32u);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_load), 1.0);
}

// Shifted by one float, each warp's 128 bytes straddle 5 sectors: 80%.
TEST(EmuProfile, MisalignedCopyTouchesFiveSectors) {
  Tensor in = device_floats(1025), out = device_floats(1024);
  const profile::Totals t = one_launch([&] { hand::copy(in_ptr(in) + 1, out_ptr(out), 1024); });
  EXPECT_EQ(t.global_load.sectors, 32u * 5);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_load), 0.8);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(t.global_store), 1.0);
}

// Reading a column of a 32 x 32 float tile: every lane's word is in the same bank, 32 wavefronts;
// writing rows and, with a padded tile, reading columns take one.
TEST(EmuProfile, SharedColumnReadConflictsThirtyTwoWays) {
  Tensor in = device_floats(1024), out = device_floats(1024);
  const profile::Totals t = one_launch([&] { hand::transpose_tile(in_ptr(in), out_ptr(out), false); });
  EXPECT_EQ(t.shared_load.requests, 32u);
  EXPECT_DOUBLE_EQ(profile::wavefronts_per_request(t.shared_load), 32.0);
  EXPECT_DOUBLE_EQ(profile::wavefronts_per_request(t.shared_store), 1.0);
  const profile::Totals p = one_launch([&] { hand::transpose_tile(in_ptr(in), out_ptr(out), true); });
  EXPECT_DOUBLE_EQ(profile::wavefronts_per_request(p.shared_load), 1.0);
  EXPECT_DOUBLE_EQ(profile::excess_wavefronts(p.shared_load), 1.0);
  EXPECT_DOUBLE_EQ(profile::global_efficiency(p.global_load), 1.0);
}

// Half of each warp stores: the store's requests are all partial (2 sectors of 16 lanes), and
// the warp's basic blocks diverge.
TEST(EmuProfile, HalfWarpBranchDiverges) {
  Tensor in = device_floats(1024), out = device_floats(1024);
  const profile::Totals t = one_launch([&] { hand::half_warp_store(in_ptr(in), out_ptr(out), 1024); });
  EXPECT_EQ(t.global_store.requests, 32u);
  EXPECT_EQ(t.global_store.partial, 32u);
  EXPECT_EQ(t.global_store.lanes, 32u * 16);
  EXPECT_EQ(t.global_store.sectors, 32u * 2);
  EXPECT_GT(t.divergent_branches, 0u);
  EXPECT_GT(profile::divergence(t), 0.0);
  EXPECT_LT(profile::divergence(t), 1.0);
}

// Memory outside the device and shared memory (the host stack, kernel arguments) is not counted.
TEST(EmuProfile, UntrackedMemoryIsIgnored) {
  std::vector<float> host_in(1024, 1.0f), host_out(1024);
  const profile::Totals t = one_launch([&] { hand::copy(host_in.data(), host_out.data(), 1024); });
  EXPECT_EQ(t.global_load.requests + t.global_store.requests, 0u);
  profile::track(host_in.data(), host_in.size() * sizeof(float));
  const profile::Totals u = one_launch([&] { hand::copy(host_in.data(), host_out.data(), 1024); });
  profile::untrack(host_in.data());
  EXPECT_EQ(u.global_load.requests, 32u);
  EXPECT_EQ(u.global_store.requests, 0u);
}
