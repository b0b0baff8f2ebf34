// BatchSplitter: how a global mini-batch is divided among the ranks. By default equally; with
// speed weighting, in proportion to each rank's measured speed (examples per second of forward
// and backward), measured over the first steps and re-measured every `remeasure_every` steps, so
// a slower device gets fewer examples and no rank waits for the others. Shares are integers that
// sum to the global batch (largest remainder), at least one example per rank.
//
// Every rank's loss must then be weighted by loss_weight() = size * share / global: the reducer
// averages gradients over the ranks, and this weighting makes that average equal the gradient of
// the mean loss over the whole global batch, whatever the shares.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/comm.h"

namespace ember::dist {

struct SplitOptions {
  bool speed_weighted = false;
  int measure_steps = 3;      // steps timed per measurement (after one warm-up step)
  int remeasure_every = 200;  // steps between measurements (0: measure once)
};

class BatchSplitter {
 public:
  BatchSplitter(Communicator& comm, int64_t global_batch, SplitOptions opts = {});

  // Sets the shares by hand (tests, or a split known in advance): one positive weight per rank.
  void set_weights(const std::vector<double>& weights);

  int64_t global_batch() const { return global_; }
  const std::vector<int64_t>& shares() const { return shares_; }
  int64_t local_share() const { return shares_[static_cast<size_t>(comm_.rank())]; }
  // The first example of this rank's share within the global batch.
  int64_t local_offset() const;
  // The shares as weights for data::LoaderOptions::shard_weights (they reproduce the shares).
  std::vector<double> shard_weights() const;
  double loss_weight() const;

  // Timing: call begin_compute() before forward and end_compute() after backward on every step,
  // then end_step() once per step on every rank (a collective on measurement steps). end_step()
  // returns true when the shares changed.
  void begin_compute();
  void end_compute();
  // The same, ending at `at`: with DDP pass last_timeline().last_grad, so that waiting for the
  // other ranks' gradients (which a fast rank does) is not counted as its compute.
  void end_compute(Clock::time_point at);
  bool end_step();
  int64_t steps() const { return step_; }

  // Largest-remainder shares of `n` for these weights (each >= 1 when n >= weights.size()).
  static std::vector<int64_t> shares_for(int64_t n, const std::vector<double>& weights);

 private:
  bool measuring() const;

  Communicator& comm_;
  int64_t global_;
  SplitOptions opts_;
  std::vector<int64_t> shares_;
  int64_t step_ = 0;
  Clock::time_point began_{};
  double measured_seconds_ = 0;
  int64_t measured_examples_ = 0;
  int measured_steps_ = 0;
};

}  // namespace ember::dist
