// The MPI backend of the Communicator (CPU tensors), for jobs started by mpirun or `ember launch`.
// One thread owns every MPI call: it initialises MPI (MPI_THREAD_SERIALIZED requested), starts the
// queued operations as non-blocking MPI calls in issue order, and drives their progress by testing
// them, so a bucket's all-reduce really runs while the main thread is still in backward.
//
// The same thread keeps the job from hanging. Every rank sends a small heartbeat with its state
// (the collectives it has launched and the one it waits on) to every other rank on a separate
// communicator. When this rank has waited `stall_seconds` on a collective that some rank has not
// launched, it prints what every rank is waiting on. When a rank has not been heard from for
// `dead_seconds` (it crashed or was killed), or it shut down without joining a collective this
// rank waits on, this rank prints why and exits at once with status kPeerLostExit: with the
// defaults, a dead rank stops the job within about 10 seconds.
#pragma once

#include <atomic>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "dist/comm.h"

namespace ember::dist {

struct MpiView;  // the ranks an operation runs over (comm_mpi.cpp)

struct MpiOptions {
  double heartbeat_seconds = 0.5;
  double stall_seconds = 10.0;  // report a collective some rank has not launched after this long
  double dead_seconds = 10.0;   // a rank silent this long is dead: exit with kPeerLostExit
  // When every rank runs on one node, all_reduce goes through a shared-memory segment with one
  // slot of this many bytes per rank (twice over; a larger tensor takes several rounds) instead of
  // MPI_Iallreduce (shm_allreduce.h says why). 0 keeps every collective on MPI. The environment
  // variable EMBER_MPI_SHM_SLOT_BYTES overrides it; the ranks use the smallest value any asks for,
  // and at most what keeps the segment near 32 MiB (2 x ranks x slot).
  size_t shm_slot_bytes = size_t{2} << 20;
};

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI (once per process; a second MpiCommunicator is an error) on the
  // communication thread. Throws ember::Error when MPI cannot start.
  explicit MpiCommunicator(MpiOptions opts = {});
  // Finishes the queued work, tells the other ranks this one is leaving, waits for them to leave
  // too (or to be found dead) and finalises MPI.
  ~MpiCommunicator() override;

  // True when this process was started by an MPI launcher (mpirun, srun...).
  static bool launched_by_mpi();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string backend() const override { return "mpi"; }
  // The thread support MPI granted (MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE).
  int thread_level() const { return thread_level_; }
  // How many passes the communication thread has made through its loop: while idle it should
  // wake about twice per heartbeat, not spin (diagnostics; the tests check it).
  uint64_t progress_loops() const;
  // CPU time the communication thread has used so far, in seconds: what communicating costs the
  // rank's cores, whether or not it overlaps with compute (diagnostics; bench/ddp reports it).
  double thread_cpu_seconds() const;
  // Whether all_reduce runs through shared memory (MpiOptions::shm_slot_bytes) rather than MPI.
  bool shared_memory_all_reduce() const;

  WorkPtr all_reduce(Tensor t, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  WorkPtr broadcast(Tensor t, int root = 0, std::string label = {}) override;
  WorkPtr all_gather(Tensor out, Tensor in, std::string label = {}) override;
  WorkPtr reduce_scatter(Tensor out, Tensor in, ReduceOp op = ReduceOp::Sum, std::string label = {}) override;
  WorkPtr send(Tensor t, int dst, int tag = 0) override;
  WorkPtr recv(Tensor t, int src, int tag = 0) override;
  WorkPtr barrier(std::string label = {}) override;
  // A collective of the whole world, on every rank (blocking, while setting a job up): the ranks
  // with the same `color` form one group, ranked by `key` (ties by world rank). The group's
  // communicator runs on this one's thread and must not outlive it.
  std::unique_ptr<Communicator> split(int color, int key) override;

  struct Op;  // one queued operation (comm_mpi.cpp)
  struct State;

 private:
  friend class MpiGroupCommunicator;
  MpiView world_view() const;
  WorkPtr enqueue(std::unique_ptr<Op> op);
  std::exception_ptr start_mpi();  // on the communication thread
  void open_shared_memory();       // on the communication thread, while MPI starts
  void gather_hosts();             // likewise: every rank's hostname into State::peers

  MpiOptions opts_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, thread_level_ = 0;
  std::unique_ptr<State> st_;
  std::thread thread_;
};

}  // namespace ember::dist
