// The Communicator: how the ranks of one data-parallel job talk to each other. Every collective
// (all_reduce, broadcast, all_gather, reduce_scatter), point-to-point transfer (send/recv, and a
// group of them posted together: exchange) and barrier is asynchronous: it is queued and returns a Work handle at once,
// so the caller (the data-parallel reducer, inside a gradient hook) keeps computing while the transfer progresses.
// Operations are executed in the order they are issued, and every rank must issue the same
// collectives in the same order (as MPI and NCCL require).
//
// Backends: MpiCommunicator (comm_mpi.h, CPU tensors, a dedicated communication thread that owns
// every MPI call), NcclCommunicator (comm_nccl.h, CUDA tensors, bootstrapped through MPI or, for
// one rank, SelfCommunicator) and SelfCommunicator (comm_self.h, a world of one).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::dist {

// Exit status of a rank that gives up because another rank died or left (EX_PROTOCOL): MPI's
// heartbeat (comm_mpi.h) and NCCL's watchdog (device_watchdog.h).
inline constexpr int kPeerLostExit = 76;

enum class ReduceOp { Sum, Avg, Max };
const char* reduce_op_name(ReduceOp op);

using Clock = std::chrono::steady_clock;

// The handle of one queued operation. wait() blocks until it has completed (on a GPU backend:
// makes the current compute stream wait for it instead) and rethrows its failure, if any.
class Work {
 public:
  explicit Work(std::string what) : what_(std::move(what)), issued_(Clock::now()) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual void wait();
  virtual bool completed() const;
  // What this operation is ("all_reduce sum 'bucket 3' (1234 float32)"), for stall reports.
  const std::string& what() const { return what_; }
  // When it was issued by the caller, started by the backend and completed (for timelines).
  Clock::time_point issued() const { return issued_; }
  Clock::time_point started() const;
  Clock::time_point finished() const;

  // How many threads of this process are blocked in wait() now. A backend that has to poll for
  // progress (MPI) polls without pausing while someone waits, since then a core is idle anyway,
  // and pauses between polls otherwise, to leave the cores to the computation it overlaps with.
  static std::atomic<int>& blocked_waiters();

  // Backend side.
  void mark_started();
  void finish(std::exception_ptr error = nullptr);

 protected:
  std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  Clock::time_point issued_, started_{}, finished_{};
};
using WorkPtr = std::shared_ptr<Work>;

// One point-to-point transfer of a group posted together (Communicator::exchange).
struct P2POp {
  enum Kind { Send, Recv };
  Kind kind = Send;
  Tensor t;
  int peer = 0;
  int tag = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank among the processes of this node (the device index to use).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual std::string backend() const = 0;
  // The device whose tensors this communicator moves: cpu for MPI, cuda:<local rank> for NCCL.
  // Code that exchanges its own small tensors (a model signature, timings) allocates them here.
  virtual Device device() const { return Device::cpu(); }

  // `label` only names the operation in stall reports and timelines ("bucket 2").
  // In place: every rank ends with the reduction of every rank's `t`. Avg needs a floating dtype.
  virtual WorkPtr all_reduce(Tensor t, ReduceOp op = ReduceOp::Sum, std::string label = {}) = 0;
  // In place: every rank ends with root's `t`.
  virtual WorkPtr broadcast(Tensor t, int root = 0, std::string label = {}) = 0;
  // `out` holds size() * in.numel() elements: rank r's `in` lands at [r*n, (r+1)*n).
  virtual WorkPtr all_gather(Tensor out, Tensor in, std::string label = {}) = 0;
  // `in` holds size() * out.numel() elements; rank r receives the reduction of block r.
  virtual WorkPtr reduce_scatter(Tensor out, Tensor in, ReduceOp op = ReduceOp::Sum, std::string label = {}) = 0;
  virtual WorkPtr send(Tensor t, int dst, int tag = 0) = 0;
  virtual WorkPtr recv(Tensor t, int src, int tag = 0) = 0;
  virtual WorkPtr barrier(std::string label = {}) = 0;
  // Posts every transfer of `ops` at once and returns one handle that completes when all have.
  // Two ranks that send to each other before receiving need it on NCCL: there a send waits for
  // its receive to be posted and a rank's transfers otherwise run one after another, so two
  // single sends crossing would wait for each other forever; grouped (ncclGroupStart/End) they
  // run together. On MPI every transfer is posted before any is waited for, which is all a
  // group means there. Per peer and direction, transfers still match in the order posted.
  // The base posts each through send()/recv() (MPI's are non-blocking) and waits for all.
  virtual WorkPtr exchange(std::vector<P2POp> ops, std::string label = {});

  // A communicator over some of this one's ranks (pipeline x data parallelism: the replicas of one
  // stage): a collective every rank calls; ranks passing the same `color` (>= 0) form one group,
  // ranked by `key`, ties by this communicator's rank. The result must not outlive this one.
  // ember::Error on backends that cannot split.
  virtual std::unique_ptr<Communicator> split(int color, int key);
};

// Checks shared by the backends: defined, contiguous, on `device`, and a dtype `op` can reduce.
void check_tensor(const Tensor& t, const char* what, Device device);
void check_reducible(const Tensor& t, ReduceOp op, const char* what);
// "all_reduce sum 'bucket 3' (1234 float32)"
std::string describe(const char* op, const Tensor& t, const std::string& label, const char* extra = nullptr);
// Every transfer of a group: a defined contiguous tensor on `device`, another rank as the peer.
// Checked before any is posted, so that a refused group leaves nothing half sent.
void check_exchange(const std::vector<P2POp>& ops, int rank, int size, Device device);
// "exchange 'gradient 2' (3 transfers: 96 elements sent, 48 received)"
std::string describe_group(const std::vector<P2POp>& ops, const std::string& label);

// Work a rank has queued on a device and may be blocked on without any communicator call running
// (an NCCL collective on the communication stream, the host waiting in a stream synchronisation):
// a communicator whose operations complete on a device registers, for its lifetime, a function
// returning its oldest operation not yet complete ("" when none). A rank that gives up because it
// lost another (MpiCommunicator's heartbeat, which keeps running beside an NCCL communicator it
// bootstrapped) names these too, so a rank killed mid-step on NCCL ends the others naming the
// bucket they waited on, as on MPI. Thread-safe; the functions are called from the giving-up
// thread.
void register_device_work(const void* owner, std::function<std::string()> oldest_incomplete);
void unregister_device_work(const void* owner);
// Every registered owner's answer that is not empty.
std::vector<std::string> incomplete_device_work();

}  // namespace ember::dist
