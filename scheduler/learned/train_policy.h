// Trains the learned policy's network by policy gradient inside the simulator (`ember sched
// train-policy`), with Ember's own autograd and Adam. Each iteration cuts a window of consecutive
// jobs from the training part of a trace (jobs submitted before `train_until`), runs `rollouts`
// simulations of it with the exploring policy (different Gumbel seeds), and takes one step of
// REINFORCE on the Plackett-Luce probability of each decision's order prefix:
//   reward     r_k = -(jobs in the system) x (time to the next decision) / (3600 x jobs), so the
//                    return from the start is minus the window's average JCT in hours;
//   advantage  A_k = reward-to-go from decision k minus the other rollouts' reward-to-go from the
//                    same moment (a time-based baseline, as Decima's: the rollouts share arrivals),
//                    normalised over the iteration.
// Seeded and reproducible: the same options give the same weights bit for bit on one thread at one
// CPU capability level (the kernels' rounding differs between levels).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/job.h"
#include "scheduler/learned/policy_net.h"

namespace ember::sched::learned {

struct TrainPolicyOptions {
  double train_until = 5 * 86400.0;  // seconds: jobs submitted earlier are the training part
  int gpus = 256;
  int node_gpus = 0;  // devices per node (0: one flat pool)
  double preempt_cost = 0;
  int window_jobs = 800;
  int rollouts = 4;
  int iterations = 150;
  double lr = 3e-3;
  uint64_t seed = 1;
  int eval_every = 10;     // evaluate the deterministic policy on the validation windows this often
  int val_windows = 4;     // the validation windows: the last this many windows of the training part
  double temperature = 3;  // exploration: orders drawn from Plackett-Luce of score / temperature
};

struct CurvePoint {
  int iteration = 0;
  double window_start = 0;  // submit time of the window's first job in the trace
  double rollout_mean = 0;  // average JCT (s) over the exploring rollouts
  double rollout_best = 0;
  double gittins = 0, las = 0;  // the heuristics on the same window
  double eval = -1;  // deterministic policy, average JCT over the validation windows' jobs (-1: not evaluated)
  double eval_gittins = -1, eval_las = -1;
};

// The network returned is the one that did best on the validation windows (the end of the
// training part, never the held-out jobs), the untrained start (iteration 0, the Gittins ranking)
// included: policy-gradient steps are noisy, and a later step may undo a good one. Several windows,
// because a step that happens to suit one window's few long jobs is not a better policy: chosen on
// one window, the shipped network lost up to 13% to its own start on the held-out days.
struct TrainResult {
  std::shared_ptr<PolicyNet> net;
  std::vector<CurvePoint> curve;  // iteration 0 is the start's evaluation
  int best_iteration = 0;
  double best_eval = 0;
};

// log P of drawing the first `prefix` positions of an order from the Plackett-Luce distribution of
// `scores` (scores[p] is the score of the job at position p), and its gradient with respect to
// each score, added to `grad` times `weight`. O(positions).
double plackett_luce_prefix(const std::vector<double>& scores, int prefix, double weight, std::vector<double>& grad);

// The jobs [first, first + count) of `trace`, re-based so that the first is submitted at 0.
std::vector<JobSpec> cut_window(const std::vector<JobSpec>& trace, size_t first, size_t count);

// Throws ember::Error for options out of range or a training part smaller than a window.
TrainResult train_policy(const std::vector<JobSpec>& trace, const TrainPolicyOptions& o,
                         const std::function<void(const CurvePoint&)>& progress = {});

std::string curve_csv(const std::vector<CurvePoint>& curve);
// The exploring rollouts' and the evaluations' average JCT as ratios to gittins on the same
// windows, per iteration.
std::string curve_svg(const std::vector<CurvePoint>& curve, const std::string& title);

}  // namespace ember::sched::learned
