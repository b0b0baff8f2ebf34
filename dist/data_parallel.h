// DataParallel: the data-parallel wrapper a training program holds, `DataParallel net(model, comm,
// global_batch)`. It bundles what every data-parallel loop needs around one model: the gradient
// reducer (DistributedDataParallel, ddp.h: rank 0's weights everywhere, buckets all-reduced while
// backward runs), the batch splitter (BatchSplitter, ddp_split.h: each rank's share of the global
// batch, equal, fixed or speed-weighted) and the loss weight that makes unequal shares average to
// the global batch's gradient; the step's timing for speed weighting; the small agreements a loop
// makes across ranks (stop now? the sums of an evaluation); and the job's checkpoints
// (ddp_checkpoint.h). A step reads:
//
//   Tensor loss = net.weight(cross_entropy(net(x), y));  // x: this rank's share
//   opt.zero_grad(); loss.backward(); opt.step();
//   if (net.end_step()) loader.set_shard_weights(net.shard_weights());
//   if (net.any(stop_requested)) ...                       // every rank stops at the same step
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/ddp_checkpoint.h"
#include "dist/ddp_split.h"
#include "dist/noise_scale.h"
#include "layers/checkpoint.h"

namespace ember::dist {

struct DataParallelOptions {
  // Buckets as big as PyTorch's; gradients as views into them, so no copy of the buckets per step.
  DdpOptions ddp{.gradient_as_bucket_view = true};
  SplitOptions split;
  // Fixed relative shares, one positive weight per rank (empty: equal, or speed-weighted).
  std::vector<double> weights;
  // Measure the gradient noise scale every step (noise_scale.h): the gradient norms of the
  // reducer, with the harmonic mean of the ranks' shares as the small batch (exact for unequal
  // shares too) and the global batch as the large one.
  bool measure_noise = false;
};

class DataParallel {
 public:
  // `comm` carries the job's small exchanges (splitter timings, stop flags, sums, checkpoint
  // barriers); `grad_comm` the gradients, when they travel elsewhere (NCCL between GPU ranks); by
  // default `comm`. Both must outlive this object, and so must `module`.
  DataParallel(nn::Module& module, Communicator& comm, int64_t global_batch, DataParallelOptions opts = {},
               Communicator* grad_comm = nullptr);

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  nn::Module& module() { return ddp_.module(); }
  DistributedDataParallel& ddp() { return ddp_; }
  const BatchSplitter& splitter() const { return split_; }

  // Starts the step's compute timing and runs the model through the reducer. `x` is this rank's
  // share of the global batch.
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // `loss` (this rank's mean) scaled in place by loss_weight(), so that the ranks' averaged
  // gradient is the gradient of the global batch's mean, whatever the shares.
  Tensor weight(Tensor loss) const;
  double loss_weight() const { return split_.loss_weight(); }
  // After the optimizer step, on every rank: ends the step's timing (at the last gradient, so a
  // fast rank's wait for the others is not counted as its compute) and, on the splitter's
  // measurement steps, re-divides the batch (a collective then). True when the shares changed:
  // the loader's shard_weights must follow.
  bool end_step();
  // The shares as data::LoaderOptions::shard_weights, and as example counts.
  std::vector<double> shard_weights() const { return split_.shard_weights(); }
  const std::vector<int64_t>& shares() const { return split_.shares(); }

  // True on every rank when `flag` is true on any (a signal reaches the ranks at different steps:
  // they agree before anyone stops). A collective.
  bool any(bool flag);
  // Sums each value over the ranks, in float64 (an evaluation's loss and counts). A collective.
  std::vector<double> sum(const std::vector<double>& values);

  // The smoothed gradient noise scale (measure_noise, two ranks or more); nullopt before the first
  // estimate or while the averaged signal |G|^2 is not positive.
  std::optional<double> noise_scale() const { return noise_.value(); }
  // Seconds the synchronised steps so far waited, after their backward's last gradient, for the
  // gradients of the others (what the all-reduce did not hide): with the steps' count, the part
  // of a step that does not shrink with the per-rank batch (the daemon's batch choice, elastic.md).
  double exposed_sync_seconds() const { return exposed_sync_s_; }

  // "Data-parallel over 2 ranks: shares of each batch 8/24, 5 gradient buckets (mpi)", and
  // ", overlap off" when the buckets wait for backward's end.
  std::string summary() const;

  // The job's checkpoint in `dir` (last.ckpt and a file per rank, ddp_checkpoint.h). Collectives.
  void save(const std::string& dir, const TrainingState& state, const TrainingPosition& position,
            const std::map<std::string, std::string>& metadata) {
    save_distributed(dir, comm_, state, position, metadata);
  }
  DistributedResume load(const std::string& dir, const TrainingState& state, bool allow_reshard) {
    return load_distributed(dir, comm_, state, allow_reshard);
  }

 private:
  Communicator& comm_;
  Communicator& grad_comm_;
  bool overlap_;
  DistributedDataParallel ddp_;
  BatchSplitter split_;
  NoiseScale noise_;
  int64_t counted_step_ = -1;  // the reducer's synchronised step the last noise sample and wait came from
  double exposed_sync_s_ = 0;
  bool accumulating_ = false;  // the last forward ran under no_sync: the step's timing has begun
};

}  // namespace ember::dist
