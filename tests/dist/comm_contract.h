// The Communicator's contract, written once against the interface and run on every backend: on
// MPI ranks and on MPI under NCCL's point-to-point rules (tests/dist/comm_contract_test.cpp, in
// CI), and on NCCL (tests/gpu/nccl_test.cpp, the GPU check: two ranks on one GPU). CI has no GPU,
// so what the pipeline and the 2D grid need from NCCL is proven here through the MPI twin and the
// same bodies run on NCCL wherever a GPU is lent.
//   - exchange(): transfers crossing between ranks in one group all complete (a ring where every
//     rank sends before it receives), with several dtypes and sizes.
//   - order: a peer's transfers in one direction arrive in the order posted, alone and in a group.
//   - split(): groups by colour, ranked by key, with their own collectives and exchanges,
//     interleaved with the parent's.
//   - a refused exchange names the transfer and posts nothing.
// Every function is a collective of `c`'s ranks; tensors live on c.device().
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops.h"
#include "dist/comm.h"
#include "test_helpers.h"

namespace comm_contract {

using ember::DType;
using ember::Tensor;
using ember::dist::Communicator;
using ember::dist::P2POp;

// Rank q's message j (< 8) of n elements: distinct per rank and message, exact in bfloat16 for
// up to 8 ranks.
inline Tensor message(const Communicator& c, int q, int j, int64_t n, DType dt) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(32.0 * q + 4.0 * j + static_cast<double>(i % 4));
  return ember::from_vector(v, {n}, ember::TensorOptions{.dtype = dt}).to(c.device());
}

inline void expect_message(const Tensor& got, int q, int j, const std::string& what) {
  const std::vector<double> v = got.to(ember::Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 32.0 * q + 4.0 * j + static_cast<double>(i % 4)) {
      ADD_FAILURE() << what << ": element " << i << " is " << v[i] << ", expected message " << j << " of rank " << q;
      return;
    }
}

// Every rank sends to the next and receives from the previous in one group: posted one by one on
// NCCL (send first) this ring would hang; grouped it completes.
inline void grouped_ring(Communicator& c) {
  const int n = c.size(), r = c.rank();
  if (n < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (DType dt : {DType::Float32, DType::Int64, DType::BFloat16})
    for (int64_t numel : {int64_t{1}, int64_t{1000}, int64_t{65537}}) {
      Tensor got = ember::empty({numel}, {.dtype = dt, .device = c.device()});
      c.exchange({{P2POp::Send, message(c, r, 0, numel, dt), next, 7}, {P2POp::Recv, got, prev, 7}}, "ring")->wait();
      expect_message(got, prev, 0, std::string("ring ") + ember::dtype_name(dt) + " x" + std::to_string(numel));
    }
}

// Rank pairs (0, 1), (2, 3), ...: each sends three messages of different sizes to the other, alone
// (the lower rank receives first so that single transfers cannot cross) and then in one group
// holding both directions. Each direction's messages arrive in the order posted.
inline void order_with_peer(Communicator& c, int peer) {
  const int r = c.rank();
  const std::vector<int64_t> sizes = {5, 3000, 17};
  std::vector<Tensor> got;
  for (int64_t n : sizes) got.push_back(ember::empty({n}, {.device = c.device()}));
  auto receive_all = [&] {
    for (size_t j = 0; j < sizes.size(); ++j) c.recv(got[j], peer, 3)->wait();
  };
  auto send_all = [&] {
    for (size_t j = 0; j < sizes.size(); ++j)
      c.send(message(c, r, static_cast<int>(j), sizes[j], DType::Float32), peer, 3)->wait();
  };
  if (r < peer) {
    receive_all();
    send_all();
  } else {
    send_all();
    receive_all();
  }
  for (size_t j = 0; j < sizes.size(); ++j) expect_message(got[j], peer, static_cast<int>(j), "single");
  std::vector<P2POp> ops;
  std::vector<Tensor> in;
  for (size_t j = 0; j < sizes.size(); ++j) {
    in.push_back(ember::empty({sizes[j]}, {.device = c.device()}));
    ops.push_back({P2POp::Send, message(c, r, static_cast<int>(j) + 3, sizes[j], DType::Float32), peer, 4});
    ops.push_back({P2POp::Recv, in.back(), peer, 4});
  }
  c.exchange(std::move(ops), "both ways")->wait();
  for (size_t j = 0; j < sizes.size(); ++j) expect_message(in[j], peer, static_cast<int>(j) + 3, "grouped");
}

inline void order_per_peer(Communicator& c) {
  if (c.size() < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  const int peer = c.rank() ^ 1;
  if (peer < c.size()) order_with_peer(c, peer);  // the last of an odd number of ranks has none
  c.barrier("order per peer")->wait();
}

// Even and odd ranks form two groups ranked in reverse (key -rank): the groups' all-reduces and
// exchanges stay inside them, interleaved with the parent's all-reduce; the parent works after.
inline void split_groups(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::unique_ptr<Communicator> g = c.split(r % 2, -r);
  std::vector<int> members;  // world ranks of this group, ascending
  for (int q = 0; q < n; ++q)
    if (q % 2 == r % 2) members.push_back(q);
  const int m = static_cast<int>(members.size());
  ASSERT_EQ(g->size(), m);
  EXPECT_EQ(g->rank(), m - 1 - r / 2);  // the highest world rank is the group's rank 0
  EXPECT_EQ(g->device(), c.device());
  Tensor mine = ember::full({9}, r, {.dtype = DType::Float32, .device = c.device()});
  Tensor world = ember::full({9}, r, {.dtype = DType::Float32, .device = c.device()});
  auto gw = g->all_reduce(mine, ember::dist::ReduceOp::Sum, "group");
  auto ww = c.all_reduce(world, ember::dist::ReduceOp::Sum, "world");
  gw->wait();
  ww->wait();
  double sum = 0;
  for (int q : members) sum += q;
  EXPECT_EQ(mine.to(ember::Device::cpu()).to_vector<double>()[8], sum);
  EXPECT_EQ(world.to(ember::Device::cpu()).to_vector<double>()[8], n * (n - 1) / 2.0);
  Tensor b = ember::full({3}, r, {.dtype = DType::Int64, .device = c.device()});
  g->broadcast(b, 0, "group root")->wait();
  EXPECT_EQ(b.to(ember::Device::cpu()).to_vector<int64_t>()[0], members.back());
  if (m > 1) {  // a grouped ring inside the group, in group ranks
    const int gr = g->rank(), next = (gr + 1) % m, prev = (gr + m - 1) % m;
    Tensor got = ember::empty({300}, {.device = c.device()});
    g->exchange({{P2POp::Send, message(c, r, 1, 300, DType::Float32), next, 0}, {P2POp::Recv, got, prev, 0}},
                "group ring")
        ->wait();
    expect_message(got, members[static_cast<size_t>(m - 1 - prev)], 1, "group ring");
  }
  g->barrier("group barrier")->wait();
  c.barrier("after the groups")->wait();
}

// A group with one bad transfer is refused whole, naming it; nothing of it was posted (the
// exchange after it pairs up as if it had never been tried).
inline void refused_exchange(Communicator& c) {
  const int n = c.size(), r = c.rank();
  Tensor t = ember::zeros({4}, {.device = c.device()});
  std::string e = test_util::error_of([&] { c.exchange({}); });
  EXPECT_TRUE(test_util::has(e, "exchange: expected at least one transfer")) << e;
  if (n < 2) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  e = test_util::error_of([&] { c.exchange({{P2POp::Send, t, next, 0}, {P2POp::Recv, t, r, 0}}); });
  EXPECT_TRUE(test_util::has(e, "exchange recv: expected another rank")) << e;
  e = test_util::error_of([&] { c.exchange({{P2POp::Send, t, next, 0}, {P2POp::Recv, Tensor(), prev, 0}}); });
  EXPECT_TRUE(test_util::has(e, "exchange recv: expected a defined tensor")) << e;
  Tensor got = ember::empty({4}, {.device = c.device()});
  c.exchange({{P2POp::Send, message(c, r, 2, 4, DType::Float32), next, 0}, {P2POp::Recv, got, prev, 0}})->wait();
  expect_message(got, prev, 2, "after the refused groups");
}

}  // namespace comm_contract
