// A world of one process: the Communicator a single process uses where a job is written for
// several (PyTorch's world_size == 1, MPI_COMM_SELF). Every collective is the identity or a copy
// and completes before it returns; there is no other rank to send to or receive from. It
// bootstraps an NcclCommunicator of one rank without MPI, which is how the GPU check runs the
// NCCL tests on a machine that has no MPI launcher (tests/gpu/nccl_test.cpp).
#pragma once

#include "dist/comm.h"

namespace ember::dist {

class SelfCommunicator final : public Communicator {
 public:
  // `device`: where the tensors it is given live (any device; nothing is moved).
  explicit SelfCommunicator(Device device = Device::cpu()) : device_(device) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string backend() const override { return "self"; }
  Device device() const override { return device_; }

  WorkPtr all_reduce(Tensor t, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  WorkPtr broadcast(Tensor t, int root = 0, std::string label = {}) override;
  WorkPtr all_gather(Tensor out, Tensor in, std::string label = {}) override;
  WorkPtr reduce_scatter(Tensor out, Tensor in, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  // Errors: a world of one has no other rank.
  WorkPtr send(Tensor t, int dst, int tag = 0) override;
  WorkPtr recv(Tensor t, int src, int tag = 0) override;
  WorkPtr barrier(std::string label = {}) override;
  // Another world of one (every colour forms a group of this one rank).
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  Device device_;
};

}  // namespace ember::dist
