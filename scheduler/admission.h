// Admission control: at submission, an estimate of when the job will start, and a rule against a
// target start delay (admit, defer with a time to resubmit, or refuse).
//
// Two estimates, both from what a scheduler knows at submit time (never a duration it was not
// told: predictions, estimates, and the run times of jobs that finished):
// - queueing: M/G/c on devices, conditioned on the current queue. The cluster's C devices are the
//   servers and each job ahead of this one is g device-tasks; an arrival that finds q device-tasks
//   to be served before it (the devices the jobs ahead take and its own, less the free ones) waits
//   for q releases, (q - 1 + (1 + scv) / 2) x E[S] / C, with E[S] and its squared coefficient of
//   variation scv the device-weighted mean and variation of the durations of recently finished
//   jobs (for exponential service this is M/M/c's exact (k + 1) / (c mu)).
// - look-ahead: a short simulation from the current state: the running jobs end at their
//   predicted times, the jobs the policy ranks ahead of this one start in that order with best-fit
//   placement on the real nodes as devices free, and the estimate is when this one first fits.
//   Under a preemptive policy a job ahead gives its devices up sooner if, as it runs, its rank
//   falls behind this one's (RankingPolicy::ahead_until: LAS's thresholds, Gittins' bin edges).
//   It ignores later arrivals (which can overtake under SJF, SRSF and Gittins).
// Run times in the look-ahead are the history predictor's (scheduler/predict.h: the recent run times
// of the job's queue and gang size), asked once at each job's arrival, never the trace's durations.
// The rule uses the look-ahead (it knows placement and the running jobs' remaining times); the
// simulator reports both estimates' errors against the delays that happened.
#pragma once

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"
#include "scheduler/predict.h"

namespace ember::sched {

// Erlang C: the probability that an arrival waits in M/M/c with `servers` servers and offered
// load a = lambda / mu (< servers). Throws ember::Error outside 0 <= a < servers.
double erlang_c(int servers, double offered);
// Mean wait in queue of M/M/c, W_q = C(c, a) / (c mu - lambda).
double mmc_wait(int servers, double lambda, double mean_service);
// M/G/c by Allen-Cunneen: M/M/c's wait x (1 + scv) / 2 (exact for c = 1: Pollaczek-Khinchine).
double mgc_wait(int servers, double lambda, double mean_service, double scv);

struct AdmissionOptions {
  double target = 3600;  // seconds: the start delay admitted jobs are promised
  bool refuse = false;   // a job over the target is refused instead of deferred
  int max_defers = 3;    // a job deferred this often is refused when still over the target
  int history = 1000;    // finished jobs (service) and arrivals (rate) the model keeps
  // The run-time predictor's, the simulator's `--set history.KEY=V` (scheduler/predict.h): its
  // prior is also the mean service time until a job has finished.
  HistoryOptions predictor = {};
  // The fraction of admitted jobs that should start within the target. The rule admits a job when
  // its look-ahead estimate, scaled by this quantile of actual / estimated delay over the recently
  // started admitted jobs, is within the target: the estimates' own record sets the margin.
  double slo = 0.95;
  // Take a job's own estimate (JobSpec::estimate, the daemon's `--expected`) as its run time when it
  // has one. Off in the simulator, where the estimate column defaults to the true duration.
  bool use_estimates = false;
};

struct StartEstimate {
  double queueing = 0;    // seconds, M/G/c conditioned on the queue
  double lookahead = 0;   // seconds, the look-ahead simulation
  double steady = 0;      // seconds, M/G/c's mean wait at the recent arrival rate (the cluster's state aside)
  double calibrated = 0;  // seconds, the look-ahead scaled by the record of past estimates: what the rule uses
  double decision() const { return calibrated; }
  // What the look-ahead's run times rest on, counted over the jobs it let run before this one:
  // their submitters' estimates (AdmissionOptions::use_estimates), the run times of finished jobs,
  // or, with too few jobs finished to learn from, the predictor's prior (a guess).
  int from_estimates = 0, from_history = 0, from_prior = 0;
  long finished_jobs = 0;  // finished jobs the history had learned from
  double prior = 0;        // seconds each job of from_prior was taken to run
};

// The basis of an estimate in words, for a submitter: "a guess: ..." when a prior stood in for run
// times, else "from the run times of 12 finished jobs" and the like; "" when the look-ahead
// needed no run time (the job fits now).
std::string estimate_basis(const StartEstimate& e);

enum class Verdict { kAdmit, kDefer, kRefuse };

struct AdmissionAnswer {
  Verdict verdict = Verdict::kAdmit;
  StartEstimate estimate;
  double resubmit_at = -1;  // kDefer: when the estimate says the job would meet the target
};

class AdmissionControl {
 public:
  // `policy` ranks the jobs ahead when it is a ranking policy (scheduler/ranking.h); otherwise
  // the waiting jobs ahead are taken in submission order. Not owned.
  AdmissionControl(AdmissionOptions opt, Policy* policy);
  const AdmissionOptions& options() const { return opt_; }

  // Every arrival, admitted or not: the arrival rate, and the job's predicted run time.
  void arrived(const Job& j, double t);
  // A job that completed `run_time` seconds of work at `t` (finish order): the service
  // distribution and the predictor's history.
  void finished(const Job& j, double run_time, double t);
  // An admitted job started, `delay` seconds after its admission, which had estimated `estimate`
  // (the look-ahead): the calibration's record.
  void started(double estimate, double delay);
  // A job that left without finishing (refused, cancelled).
  void forget(JobId id) { predicted_.erase(id); }

  // `j` is the arriving job (told to arrived()), not yet in s.waiting.
  StartEstimate estimate(const SchedState& s, const Job& j) const;
  AdmissionAnswer decide(const SchedState& s, const Job& j, int defers_so_far) const;

  // Device-weighted mean duration and squared coefficient of variation of the recent finishes
  // (the predictor's prior, scv 1, until any job has finished).
  double mean_service() const;
  double service_scv() const;
  double arrival_rate() const;  // jobs per second over the recent arrivals (0 with fewer than 2)
  double mean_gang() const;

 private:
  AdmissionOptions opt_;
  Policy* policy_;
  // The policy's traits, read once: a job ahead under a preemptive ranking policy gives way once it
  // falls behind; under a strictly ordered one the look-ahead stops at the first job that waits.
  bool preemptive_ = false, strict_ = false;
  std::deque<std::pair<int, double>> finished_;  // (gpus, run time)
  double sum_g_ = 0, sum_gd_ = 0, sum_gd2_ = 0;
  std::deque<double> arrivals_;
  HistoryPredictor predictor_;
  enum class Basis { kEstimate, kHistory, kPrior };
  struct Predicted {
    double seconds;
    Basis basis;
  };
  std::unordered_map<JobId, Predicted> predicted_;  // run time predicted at each live job's arrival
  long finishes_ = 0;                               // finished jobs told
  std::deque<double> ratios_;                       // actual / max(estimate, 60 s) of recent starts
  double calibration_ = 1;                          // their `slo` quantile (1 before any start)
  double newest_ = -kInf;                           // the newest finish told
  // Seconds `x` still has to run at `now` by its prediction (a job past it: as long as it has run),
  // counted in `e` by what the prediction rests on.
  double remaining(const Job& x, double now, StartEstimate& e) const;
  Basis mean_basis() const { return sum_g_ > 0 && sum_gd_ > 0 ? Basis::kHistory : Basis::kPrior; }
  static void count(Basis b, StartEstimate& e);
  // When a job that holds devices in the look-ahead gives them up; ordered for a min-heap of
  // std::push_heap (the earliest first).
  struct Release {
    double at;
    Placement where;
    bool operator<(const Release& o) const { return at > o.at; }
  };
  // The look-ahead's step at `t`: the jobs of `left` that fit on `free` start in order (under
  // strict FCFS up to the first that does not), leave `left` and add their releases to `ends`.
  void start_fitting(const SchedState& s, const Ranked& mine, double t, std::vector<const Job*>& left, FreeMap& free,
                     std::vector<Release>& ends, StartEstimate& e) const;
};

// "2 h 10 min", "1 h", "35 min", "2 min 30 s", "40 s", "now": how the daemon tells a submitter.
std::string format_delay(double seconds);

}  // namespace ember::sched
