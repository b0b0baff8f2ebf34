// The communicator contract (comm_contract.h) on real MPI ranks, and on MPI under NCCL's
// point-to-point rules (rendezvous_comm.h: a send completes only once its receive is posted,
// transfers one after another), which is what makes the grouped crossing necessary on NCCL.
// tests/gpu/nccl_test.cpp runs the same bodies on NCCL.
#include "comm_contract.h"

#include "dist_test_util.h"
#include "rendezvous_comm.h"

namespace {

using dist_test::comm;

TEST(CommContractMpi, GroupedRing) {
  comm_contract::grouped_ring(comm());
}
TEST(CommContractMpi, OrderPerPeer) {
  comm_contract::order_per_peer(comm());
}
TEST(CommContractMpi, SplitGroups) {
  comm_contract::split_groups(comm());
}
TEST(CommContractMpi, RefusedExchange) {
  comm_contract::refused_exchange(comm());
}

TEST(CommContractRendezvous, GroupedRing) {
  dist_test::RendezvousCommunicator ordered(comm());
  comm_contract::grouped_ring(ordered);
}
TEST(CommContractRendezvous, OrderPerPeer) {
  dist_test::RendezvousCommunicator ordered(comm());
  comm_contract::order_per_peer(ordered);
}
TEST(CommContractRendezvous, SplitGroups) {
  dist_test::RendezvousCommunicator ordered(comm());
  comm_contract::split_groups(ordered);
}
TEST(CommContractRendezvous, RefusedExchange) {
  dist_test::RendezvousCommunicator ordered(comm());
  comm_contract::refused_exchange(ordered);
}

}  // namespace
