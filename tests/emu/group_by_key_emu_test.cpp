// The deterministic grouping behind the CUDA index_add and scatter (core/cuda/group_by_key.cu)
// run by the kernel emulator in all three thread orders: for every key, start/perm must list
// exactly the positions holding that key, in increasing order (the order the slots are first
// taken in depends on thread timing; the sort must undo it). Many repeats (large groups that
// are heap-sorted), empty keys, one single group, more positions than a block, and more keys
// than the one-block prefix sum takes (the multi-block scan, counted by its launches).
// It stays here because group_by_key is a helper with no stub of its own: the op table reaches it
// only inside scatter and index_add, through their results, while this checks its own output
// (start and perm) and the multi-block scan's launches.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/group_by_key.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using test_util::expect_error;

namespace {

class GroupByKey : public emu_test::EmulatedKernel {};

void check_groups(const Tensor& keys, int64_t nkeys, const std::string& what) {
  const int64_t m = keys.numel();
  Tensor dev = device_copy(keys);
  const cuda::KeyGroups g = cuda::group_by_key(static_cast<const int64_t*>(dev.raw_data()), m, nkeys, Device::cpu());
  const std::vector<int64_t> k = keys.to_vector<int64_t>();
  // The expected groups: positions of each key in increasing order, laid out key after key.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(nkeys));
  for (int64_t j = 0; j < m; ++j) members[k[j]].push_back(j);
  std::vector<int64_t> want_start, want_perm;
  for (const auto& group : members) {
    want_start.push_back(static_cast<int64_t>(want_perm.size()));
    want_perm.insert(want_perm.end(), group.begin(), group.end());
  }
  want_start.push_back(m);
  EXPECT_EQ(std::vector<int64_t>(g.start, g.start + nkeys + 1), want_start) << what;
  EXPECT_EQ(std::vector<int64_t>(g.perm, g.perm + m), want_perm) << what;
}

}  // namespace

TEST_P(GroupByKey, ListsEveryKeysPositionsInIncreasingOrder) {
  check_groups(randint(0, 7, {3001}), 7, "7 keys, about 430 positions each");
  check_groups(randint(0, 50, {40}), 50, "more keys than positions (empty groups)");
  check_groups(randint(0, 300, {700}), 300, "small groups");
  check_groups(full({1000}, 4, {.dtype = DType::Int64}), 5, "one group of 1000");
  check_groups(zeros({1}, {.dtype = DType::Int64}), 1, "one position");
}

TEST_P(GroupByKey, ScansManyKeysAcrossSeveralBlocks) {
  // Above 4096 keys the prefix sum runs in chunks, one per block, each in tiles of 256.
  for (int64_t nkeys : {4097, 10000, 5 * 4096 + 17}) {
    const uint64_t before = emu::stats().launches;
    check_groups(randint(0, nkeys, {3 * nkeys / 2}), nkeys, std::to_string(nkeys) + " keys");
    // count, chunk sums, scan of the sums, chunk scans, place, sort.
    EXPECT_EQ(emu::stats().launches - before, 6u) << nkeys;
  }
  // The chunks' boundaries inside one group: a single key near the end.
  check_groups(full({9000}, 8999, {.dtype = DType::Int64}), 9000, "one group at the end of 9000 keys");
}

TEST_P(GroupByKey, RejectsNoPositionsOrNoKeys) {
  Tensor k = device_copy(zeros({1}, {.dtype = DType::Int64}));
  const int64_t* p = static_cast<const int64_t*>(k.raw_data());
  expect_error([&] { cuda::group_by_key(p, 0, 3, Device::cpu()); }, "group_by_key", "at least one");
  expect_error([&] { cuda::group_by_key(p, 1, 0, Device::cpu()); }, "group_by_key", "at least one");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, GroupByKey, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
