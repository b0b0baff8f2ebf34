// Gradient accumulation (--accumulate N in the classifier and language-model programs; the daemon's
// EMBER_ELASTIC_ACCUMULATE for elastic jobs): each optimizer step's batch (a data-parallel rank's
// share of it) runs as N micro-batches, forward and backward one after another, their gradients
// added up before the one optimizer step. --batch-size keeps its meaning, the batch of one
// optimizer step, so a checkpoint, the data order, the learning rate and the metrics are those of
// the run without it; what changes is the memory (a micro-batch's activations, not the batch's)
// and, in a data-parallel job, the gradients are all-reduced once, after the last micro-batch
// (DistributedDataParallel::no_sync for the others, as a PyTorch loop does).
//
// The same update, not an approximation: each micro-batch's loss is its summed loss divided by the
// whole batch's divisor of cross_entropy's mean (the summed class weight of the targets not
// ignored), so the gradients add up to the batch mean's. What differs, as in PyTorch: layers that
// compute statistics over the batch (batch norm in training) see micro-batches, and the float sums
// are taken in another order.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "layers/module.h"
#include "train/parallel_job.h"

namespace ember::train {

// The run's micro-batches per step (1 until the program sets it from its flags).
int64_t& run_accumulation();

// The [begin, end) rows of the micro-batches of a batch of `rows`: min(n, rows) pieces (an empty
// one would add nothing) whose sizes differ by at most one, larger first (torch.tensor_split's).
// n >= 1.
std::vector<std::pair<int64_t, int64_t>> micro_batch_ranges(int64_t rows, int64_t n);

// What cross_entropy's mean over `target` divides by (class targets): the number of targets that
// are not opts.ignore_index, or, with class weights, the sum of their weights. A float64 on the host.
double cross_entropy_divisor(const Tensor& target, const CrossEntropyOptions& opts);

// The forward and backward of one optimizer step on (x, y) (a data-parallel rank's share), in the
// run's micro-batches, each forward and loss under the run's autocast (train/precision.h). `loss`
// gives a piece's loss from its logits and targets with the options it is handed (the criterion,
// or its Sum reduction when the batch is split), `correct` a piece's count of right predictions
// as a scalar tensor. The gradients are added to the parameters' (the caller zeroes them first);
// in a data-parallel job they are all-reduced once, after the last piece. Returns the batch's mean
// loss (before the rank's loss weight) and its correct count, read back from the device once.
struct StepPasses {
  double loss = 0;
  double correct = 0;
};
using PieceLoss = std::function<Tensor(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts)>;
using PieceCorrect = std::function<Tensor(const Tensor& logits, const Tensor& target)>;
StepPasses forward_backward(nn::Module& net, ParallelJob* job, Device dev, const Tensor& x, const Tensor& y,
                            const CrossEntropyOptions& criterion, const PieceLoss& loss, const PieceCorrect& correct);

}  // namespace ember::train
