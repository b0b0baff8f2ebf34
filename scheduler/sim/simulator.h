// Trace-driven discrete-event simulation of a policy on a cluster. Events are arrivals,
// completions, preempted jobs' exits and the policy's own wake-ups; at each event time the simulator asks the policy
// for a decision and applies it exactly as the daemon would (preemptions, then starts), so what
// is measured here is what the daemon runs. A job runs for its trace duration on whatever
// devices it gets; each preemption adds `preempt_cost` seconds to the work it must still do
// (checkpoint, restore and lost progress).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/policy.h"
#include "scheduler/predict.h"
#include "scheduler/stats.h"  // percentile, for the callers of compute_metrics

namespace ember::sched {

class AdmissionControl;  // scheduler/admission.h

struct SimOptions {
  double preempt_cost = 0;
  // What a preemption does on a real machine, as the daemon runs it (docs/scheduler/simulator.md, fidelity):
  // the victim keeps its devices for `stop_delay` seconds while it checkpoints and exits (a start
  // that needs them, and the victim's own restart, wait for the next decision after that), each
  // restart after a preemption costs `restart_delay` seconds of work (launch, restore), and the
  // work since the job's last checkpoint is lost (`JobSpec::checkpoint_interval`, or
  // `checkpoint_interval` for jobs that leave it < 0; 0: checkpointed at the stop). These add to
  // `preempt_cost`, which is also what the policy is told a preemption costs.
  double stop_delay = 0;
  double restart_delay = 0;
  double checkpoint_interval = 0;
  // Seconds every start costs before the job's work begins (launching the process: what a
  // daemon's start takes on its machine; the fidelity test measures it), on its devices.
  double start_delay = 0;
  // When set, the policy never sees a duration: each job's estimate is this predictor's answer at
  // its submission, from the jobs finished by then (told to it as they finish), and its duration
  // reads as unknown (-1), so SRSF ranks by predicted remaining time and SJF by predicted length.
  DurationPredictor* predictor = nullptr;
  // When set, each arrival is first put to admission control (scheduler/admission.h): admitted
  // jobs join the queue with their start estimates recorded, deferred ones arrive again when told
  // (a new submission: they queue from then, their JCT still counts from the first), refused ones
  // never run. It learns from every arrival and finish.
  AdmissionControl* admission = nullptr;
  // A heterogeneous cluster's speeds (scheduler/speeds.h): a job runs at the speed of its model
  // on the slowest device type it holds, and the policies see the same function. Empty: 1.
  SpeedFn speed;
  // Called after every applied decision with the state it left (tests check invariants here).
  std::function<void(const SchedState&, const Decision&)> observer;
};

struct JobResult {
  std::string name;
  std::string queue;  // team
  // Admission control: refused jobs never ran (no start, no finish, left out of the metrics).
  bool refused = false;
  int deferrals = 0;
  double admitted_at = -1;                                 // when it was admitted (its last submission)
  double estimate_queueing = -1, estimate_lookahead = -1;  // start delay estimates at admission
  double submit = 0, duration = 0;
  int gpus = 0;
  double first_start = 0, finish = 0;
  double run_time = 0;  // seconds on devices, repeated work included
  int preemptions = 0;
  double jct() const { return finish - submit; }
  // Never below 0: an arrival is handled at the event time nearest its submission (within 1 us),
  // so a job can start a hair before its submit time and run for a hair longer than its JCT.
  double queue_delay() const { return jct() > run_time ? jct() - run_time : 0.0; }
};

struct Metrics {
  double avg_jct = 0, p50_jct = 0, p99_jct = 0;
  double makespan = 0;         // first submission to last completion
  double busy_fraction = 0;    // device-seconds used / available between the first and last arrival
  double avg_queue_delay = 0;  // time not running, preempted spells included
  double preemptions_per_job = 0;
  double max_slowdown = 0;  // JCT / duration; jobs of zero duration are left out
};

struct Fairness;  // scheduler/sim/fairness.h

// What admission control did over a run, and how good its estimates were. Relative errors are
// |estimate - actual| / max(actual, 60 s): a start within the minute counts as immediate.
struct AdmissionStats {
  double target = 0;
  long admitted = 0, refused = 0, deferrals = 0;
  double fraction_admitted = 0;
  double slo_attainment = 0;               // admitted jobs that started within the target of their admission
  double error_median = 0, error_p90 = 0;  // the decision's estimate (look-ahead)
  double queueing_error_median = 0, queueing_error_p90 = 0;  // the M/G/c estimate
  double abs_error_median = 0;                               // seconds, look-ahead
  // The same over the admitted jobs that waited a minute or more (the rest are mostly estimated
  // exactly, at 0, which the medians above include).
  long delayed = 0;
  double delayed_error_median = 0, delayed_error_p90 = 0;
};

struct SimResult {
  std::string policy;
  PolicyTraits traits;
  std::string knows;             // what the policy ranks by: "durations", "predictions", "history" or "nothing"
  double prediction_error = -1;  // median |log(predicted / true duration)| when a predictor ran
  int gpus = 0;
  double preempt_cost = 0;
  Metrics metrics;
  std::vector<JobResult> jobs;  // in trace order
  long decisions = 0;
  double wall_seconds = 0;  // host time the simulation took
  double cpu_seconds = 0;   // CPU time of the process meanwhile (steadier than wall time on a shared machine)
  std::map<std::string, double> counters;
  // Between teams, when the caller measured it (measure_fairness); shown by the reports.
  std::shared_ptr<const Fairness> fairness;
  std::optional<AdmissionStats> admission;
};

// Throws ember::Error when a job can never fit the cluster, when the policy returns an invalid
// decision (naming the policy, the job and why), or when it leaves jobs waiting on a cluster
// where nothing else will ever happen.
SimResult simulate(const std::vector<JobSpec>& trace, const Topology& topo, Policy& policy, const SimOptions& opt = {});

Metrics compute_metrics(const std::vector<JobResult>& jobs, double busy_fraction);
AdmissionStats admission_stats(const std::vector<JobResult>& jobs, double target);

}  // namespace ember::sched
