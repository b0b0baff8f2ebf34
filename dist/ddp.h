// DistributedDataParallel: data-parallel training of one nn::Module over the ranks of a
// Communicator, as PyTorch's DDP does it. At construction it checks that every rank holds the same
// model and copies rank 0's parameters and buffers to the others. Parameters are grouped into
// buckets (reverse registration order, which is roughly the order backward produces their
// gradients; a small first bucket so communication starts early, then `bucket_cap_mb`). A gradient
// hook on each parameter copies its gradient, divided by the number of ranks, into its bucket's
// flat buffer; when a bucket is full its all-reduce (sum) is launched at once, buckets in the same
// order on every rank, while backward goes on. Dividing on the way in (as PyTorch's default
// communication hook does) keeps a pass over the bucket off the end of the collective, where the
// last bucket's waits. When the last gradient arrives the reducer waits for every bucket and
// hands the averaged gradients back, so after loss.backward() the gradients are those of the
// global batch and the optimizer steps as usual.
//
// Unequal batch shares: scale each rank's loss by BatchSplitter::loss_weight() (ddp_split.h) so the
// averaged gradient equals the gradient of the global-batch mean.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "layers/module.h"

namespace ember::dist {

// What happens to buffers (batch-norm running statistics) before each training forward.
enum class BufferSync {
  None,       // each rank keeps its own
  Broadcast,  // rank 0's buffers are copied to every rank (PyTorch's broadcast_buffers)
  Average,    // floating buffers are averaged over the ranks (statistics of the global batch)
};

struct DdpOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  // false: no all-reduce starts before backward ends (the reference for the overlap benchmark).
  bool overlap = true;
  // true: parameters a rank did not use contribute zeros; false: such a parameter is an error
  // that names it.
  bool find_unused_parameters = false;
  BufferSync buffer_sync = BufferSync::Broadcast;
  // true: after a synchronised backward every parameter's .grad is a view into its bucket, as
  // PyTorch's gradient_as_bucket_view: the reducer makes no copy of the buckets per step. With
  // zero_grad(set_to_none = false) backward also accumulates straight into the buckets, so no
  // gradient is allocated or copied in either (with set_to_none, autograd allocates each step's
  // gradients and the hooks copy them in). The price: the next synchronised backward overwrites
  // those gradients, so a gradient kept from one step to the next must be cloned. false: each
  // step's gradients are a fresh copy of the buckets.
  bool gradient_as_bucket_view = false;
  // true: each synchronised step also measures the squared norm of this rank's own gradient
  // (before the all-reduce) and of the averaged one (after), and averages the first over the ranks
  // (one more all-reduce, of a scalar): the inputs of the gradient noise scale (noise_scale.h).
  // Costs a pass over the gradients per step, so off unless asked.
  bool measure_grad_norms = false;
};

// The last synchronised step's squared gradient norms (DdpOptions::measure_grad_norms).
struct GradNorms {
  bool valid = false;
  double local_sqr = 0;   // |g_rank|^2 averaged over the ranks: each rank's own gradient, of its mean loss
  double global_sqr = 0;  // |g|^2 of the averaged gradient
};

// One step's communication timeline (steady-clock times; the tests and bench/ddp read it).
struct DdpTimeline {
  Clock::time_point first_grad{}, last_grad{}, synchronized{};
  struct Bucket {
    int index = 0;
    Clock::time_point launched{}, finished{};
  };
  std::vector<Bucket> buckets;  // in launch order
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(nn::Module& module, Communicator& comm, DdpOptions opts = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() { return module_; }
  Communicator& comm() { return comm_; }

  // Synchronises buffers (training mode), runs the module and prepares the reducer for the
  // backward of this output.
  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }
  // For modules with other forward signatures: call after forward with the outputs the loss is
  // computed from (finds unused parameters and arms the gradient hooks).
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  // Waits for every bucket and writes the averaged gradients (backward does this by itself when
  // every parameter got its gradient; calling it again is a no-op). Parameters that got no
  // gradient are an error naming them, unless find_unused_parameters.
  void synchronize();

  // Gradient accumulation: backward passes inside a NoSync scope only accumulate locally; the
  // first backward after it all-reduces the accumulated gradients.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d) : d_(d), prev_(d.sync_enabled_) { d.sync_enabled_ = false; }
    ~NoSync() { d_.sync_enabled_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& d_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }
  // False inside a no_sync() scope.
  bool sync_enabled() const { return sync_enabled_; }

  // The buckets, in launch order: the dotted names of their parameters and their size.
  struct BucketInfo {
    std::vector<std::string> params;
    int64_t numel = 0;
    DType dtype = DType::Float32;
  };
  std::vector<BucketInfo> bucket_layout() const;
  const DdpTimeline& last_timeline() const;
  int64_t steps_synchronized() const;
  const GradNorms& last_grad_norms() const;
  // The factor this rank's loss is scaled by before backward (DataParallel's loss weight, which
  // makes unequal shares average right): the norm of this rank's own gradient (measure_grad_norms)
  // is taken without it. 1 by default; an ember::Error unless positive and finite.
  void set_loss_weight(double w);

  struct Reducer;  // ddp.cpp

 private:
  void sync_buffers();

  nn::Module& module_;
  Communicator& comm_;
  DdpOptions opts_;
  bool sync_enabled_ = true;
  std::shared_ptr<Reducer> reducer_;
};

}  // namespace ember::dist
