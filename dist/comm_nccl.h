// The NCCL backend of the Communicator, for CUDA tensors: one NCCL communicator per process on
// device cuda:<local rank>, bootstrapped through another Communicator (MPI: rank 0 creates the
// NCCL unique id and broadcasts it). Collectives run on the device's communication stream, ordered
// after the work already queued on the compute stream by an event; Work::wait() makes the
// compute stream wait for the collective's completion event (it does not block the host), so
// compute queued afterwards sees the result.
//
// Rank r of a node takes cuda:<r>; under NCCL's opt-in for several ranks on one GPU
// (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL >= 2.30: the GPU check's two ranks on its one GPU) it takes
// cuda:<r mod devices>.
//
// Built only in CUDA builds that found NCCL (EMBER_HAVE_NCCL). Status: one rank ran on a lent H200;
// two ranks never have (tests/gpu/nccl_test.cpp and scripts/gpu-check.sh are ready for them).
#pragma once

#include <memory>

#include "dist/comm.h"

namespace ember::dist {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks: every rank must construct one at the same point.
  explicit NcclCommunicator(Communicator& bootstrap);
  ~NcclCommunicator() override;

  // NCCL_MULTI_RANK_GPU_ENABLE=1: ranks may share a GPU (NCCL refuses it below 2.30).
  static bool ranks_share_gpus();
  // Whether `local_size` ranks of this node each find a device: a GPU each, or any GPU when
  // ranks_share_gpus().
  static bool node_has_devices_for(int local_size);
  // The version of the NCCL library loaded (ncclGetVersion: 23004 is 2.30.4), not the headers'.
  static int runtime_version();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string backend() const override { return "nccl"; }
  // cuda:<local rank>, the device every tensor given to this communicator must be on.
  Device device() const override { return device_; }

  WorkPtr all_reduce(Tensor t, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  WorkPtr broadcast(Tensor t, int root = 0, std::string label = {}) override;
  WorkPtr all_gather(Tensor out, Tensor in, std::string label = {}) override;
  WorkPtr reduce_scatter(Tensor out, Tensor in, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  WorkPtr send(Tensor t, int dst, int tag = 0) override;
  WorkPtr recv(Tensor t, int src, int tag = 0) override;
  // The transfers inside one ncclGroupStart/End (tags are ignored, as by send and recv).
  WorkPtr exchange(std::vector<P2POp> ops, std::string label = {}) override;
  // Blocks the host as well, until every rank has reached it (what a barrier is for: files
  // written before it are there after it), unlike the other operations.
  WorkPtr barrier(std::string label = {}) override;
  // ncclCommSplit: the group's communicator on the same device and communication stream.
  std::unique_ptr<Communicator> split(int color, int key) override;

  struct Impl;

 private:
  NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size, int local_rank, int local_size, Device device);
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  Device device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::dist
