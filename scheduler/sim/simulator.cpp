#include "scheduler/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "core/error.h"
#include "scheduler/admission.h"
#include "scheduler/apply_decision.h"

namespace ember::sched {
namespace {

constexpr double kEps = 1e-6;  // seconds; trace times are whole seconds
// Decisions in a row that may start nothing on an idle cluster, with nothing to arrive, before a
// run is called stuck: a policy waiting for a round starts something at the next one.
constexpr long kMaxIdleWakeups = 1000;

bool submit_order(const Job* a, const Job* b) {
  if (a->spec.submit != b->spec.submit) return a->spec.submit < b->spec.submit;
  return a->id < b->id;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One run of a policy on a trace, the simulate() of simulator.h: an object whose steps are its
// methods. Each event time, run() lets the jobs due arrive (admit), asks the policy, applies its
// decision (apply, by the rules of apply_decision(), this object being the simulator's side of
// them), moves the clock to the next event (advance) and ends the jobs due then (finish); at the
// end it gathers the results (collect).
class Simulation : public DecisionTarget {
 public:
  Simulation(const std::vector<JobSpec>& trace, const Topology& topo, Policy& policy, const SimOptions& opt);
  SimResult run();

  // DecisionTarget: the jobs by id, on the simulated clock.
  bool running(JobId id) const override { return known(id) && jobs_[id].status == JobStatus::kRunning; }
  bool waiting(JobId id) const override { return known(id) && jobs_[id].status == JobStatus::kWaiting; }
  bool stopping(JobId id) const override { return jobs_[id].stopping_until > t_; }
  bool any_stopping() const override { return !stopping_.empty(); }
  const Job& job(JobId id) const override { return jobs_[id]; }
  const Cluster& cluster() const override { return cluster_; }
  void preempt(JobId id) override;
  void start(JobId id, const Placement& p) override;

 private:
  // Completions, and (with a predictor) the times running jobs outlive their predictions, in
  // min-heaps of entries that a later start or stop makes stale (`run`: the start they were made
  // at, counted over all jobs): each event costs a logarithm of the running jobs, not a walk over
  // all of them.
  struct Due {
    double at;
    JobId id;
    long run;
    double estimate;  // outlive entries: the prediction they were made for
    bool operator>(const Due& o) const { return at != o.at ? at > o.at : id > o.id; }
  };
  static void push(std::vector<Due>& h, Due d) {
    h.push_back(d);
    std::push_heap(h.begin(), h.end(), std::greater<>());
  }
  static Due pop(std::vector<Due>& h) {
    std::pop_heap(h.begin(), h.end(), std::greater<>());
    Due d = h.back();
    h.pop_back();
    return d;
  }
  static SubmitFeatures features(const Job& j) { return SubmitFeatures{j.spec.queue, j.spec.gpus, j.spec.submit}; }

  bool known(JobId id) const { return id >= 0 && static_cast<size_t>(id) < n_; }
  void load(const std::vector<JobSpec>& trace);
  bool current(const Due& d) const;
  double lost_work(const Job& j, double now) const;
  // When a running job's work will reach its prediction (the simulator then predicts it again).
  double outlive_at(const Job& j) const { return j.last_start + (j.spec.estimate + j.overhead - j.executed) / j.rate; }
  double rate_on(const Job& j, const Placement& p) const;
  void enqueue(Job& j, double at);
  void add_running(Job& j);
  void remove_running(const Job& j);
  SchedState state() const;

  void arrive();
  bool admit(Job& j);
  void predict_again();
  void apply(const Decision& d);
  double next_event(const Decision& d, const SchedState& after);
  void advance(double to);
  void finish();
  SimResult collect();
  double busy_fraction() const;

  const std::chrono::steady_clock::time_point wall0_ = std::chrono::steady_clock::now();
  const double cpu0_ = process_cpu_seconds();
  const Topology& topo_;
  Policy& policy_;
  const SimOptions& opt_;
  const size_t n_;
  std::vector<Job> jobs_;
  std::vector<double> predicted_, truth_;
  std::vector<size_t> arrival_;  // job indices in submission order
  Cluster cluster_;
  std::vector<const Job*> waiting_, running_;
  std::vector<long> running_pos_;  // where each running job sits in `running_`: O(1) removal
  std::vector<Job*> stopping_;     // preempted, still holding their devices (opt.stop_delay > 0)
  std::vector<long> start_seq_;    // the start that began each job's current run
  long starts_ = 0;
  std::vector<JobId> ending_;
  std::vector<Due> completions_, outlives_, outlived_;
  SimResult res_;
  double window0_ = 0, window1_ = 0;
  double busy_area_ = 0, whole_area_ = 0;  // device-seconds used inside the arrival window / over the whole run
  // Wall seconds each job held devices (its work is counted in reference-type seconds, `executed`).
  std::vector<double> wall_run_;
  double t_ = 0;
  size_t next_ = 0, done_ = 0;
  long idle_wakeups_ = 0;  // decisions in a row that started nothing on an idle cluster
  std::vector<char> drop_;
  // Admission control's bookkeeping: deferred jobs' next submissions (a min-heap), and per job.
  std::vector<Due> resubmits_;
  std::vector<char> refused_;
  std::vector<int> deferrals_;
  std::vector<double> admitted_at_, est_q_, est_l_;
  std::vector<double> first_submit_;
};

Simulation::Simulation(const std::vector<JobSpec>& trace, const Topology& topo, Policy& policy, const SimOptions& opt)
    : topo_(topo), policy_(policy), opt_(opt), n_(trace.size()), cluster_(topo) {
  EMBER_CHECK(opt.preempt_cost >= 0, "simulate: preemption cost must be >= 0 seconds, got ", opt.preempt_cost);
  EMBER_CHECK(opt.stop_delay >= 0 && opt.restart_delay >= 0 && opt.checkpoint_interval >= 0 && opt.start_delay >= 0,
              "simulate: the stop delay, restart delay, checkpoint interval and start delay must be >= 0 seconds, got ",
              opt.stop_delay, ", ", opt.restart_delay, ", ", opt.checkpoint_interval, " and ", opt.start_delay);
  load(trace);
  running_pos_.assign(n_, -1);
  start_seq_.assign(n_, 0);
  wall_run_.assign(n_, 0);
  drop_.assign(n_, 0);
  refused_.assign(opt.admission ? n_ : 0, 0);
  deferrals_.assign(opt.admission ? n_ : 0, 0);
  admitted_at_.assign(opt.admission ? n_ : 0, -1);
  est_q_ = est_l_ = admitted_at_;
  first_submit_.resize(n_);
  for (size_t i = 0; i < n_; ++i) first_submit_[i] = jobs_[i].spec.submit;
  res_.policy = policy.name();
  res_.traits = policy.traits();
  res_.knows = res_.traits.clairvoyant ? (opt.predictor ? "predictions" : "durations")
                                       : (res_.traits.learns ? "history" : "nothing");
  res_.gpus = topo.num_devices();
  res_.preempt_cost = opt.preempt_cost;
  if (n_ > 0) window0_ = jobs_[arrival_.front()].spec.submit, window1_ = jobs_[arrival_.back()].spec.submit;
  t_ = window0_;
}

// The trace's jobs, checked, and their order of arrival.
void Simulation::load(const std::vector<JobSpec>& trace) {
  jobs_.resize(n_);
  predicted_.resize(opt_.predictor ? n_ : 0);
  truth_.resize(n_);
  for (size_t i = 0; i < n_; ++i) {
    jobs_[i].id = static_cast<JobId>(i);
    jobs_[i].spec = trace[i];
    truth_[i] = trace[i].duration;
    if (opt_.predictor) jobs_[i].spec.duration = jobs_[i].spec.estimate = -1;  // told at arrival, from history
    const JobSpec& s = trace[i];
    EMBER_CHECK(s.duration >= 0, "simulate: job '", s.name, "' has no duration; a simulation needs every job's");
    EMBER_CHECK(topo_.min_nodes(s.gpus, s.mem_per_gpu) > 0, "simulate: job '", s.name, "' needs ", s.gpus, " devices",
                s.mem_per_gpu > 0 ? " with enough memory" : "", " but the cluster has ", topo_.num_devices(), " in ",
                topo_.num_nodes(), " node(s); it could never run");
  }
  arrival_.resize(n_);
  for (size_t i = 0; i < n_; ++i) arrival_[i] = i;
  std::stable_sort(arrival_.begin(), arrival_.end(),
                   [&](size_t a, size_t b) { return jobs_[a].spec.submit < jobs_[b].spec.submit; });
}

bool Simulation::current(const Due& d) const {
  const Job& j = jobs_[d.id];
  return j.status == JobStatus::kRunning && start_seq_[d.id] == d.run &&
         (d.estimate < 0 || j.spec.estimate == d.estimate);
}

double Simulation::lost_work(const Job& j, double now) const {
  const double every = j.spec.checkpoint_interval >= 0 ? j.spec.checkpoint_interval : opt_.checkpoint_interval;
  return work_lost_to_preemption(j.work(now), every);
}

double Simulation::rate_on(const Job& j, const Placement& p) const {
  if (!opt_.speed) return 1.0;
  double r = kInf;
  for (const Slice& sl : p) r = std::min(r, opt_.speed(j.spec, topo_.node(sl.node).type));
  EMBER_CHECK(r > 0 && r < kInf, "simulate: job '", j.spec.name, "' has speed ", r, " on its devices");
  return r;
}

void Simulation::enqueue(Job& j, double at) {
  j.status = JobStatus::kWaiting;
  j.queued_since = at;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), &j, submit_order), &j);
}

void Simulation::add_running(Job& j) {
  running_pos_[j.id] = static_cast<long>(running_.size());
  running_.push_back(&j);
}

void Simulation::remove_running(const Job& j) {
  const long at = running_pos_[j.id];
  running_[at] = running_.back();
  running_pos_[running_[at]->id] = at;
  running_.pop_back();
  running_pos_[j.id] = -1;
}

SchedState Simulation::state() const {
  SchedState st;
  st.now = t_;
  st.cluster = &cluster_;
  st.waiting = waiting_;
  st.running = running_;
  st.preempt_cost = opt_.preempt_cost;
  st.speed = opt_.speed ? &opt_.speed : nullptr;
  return st;
}

SimResult Simulation::run() {
  if (n_ == 0) return res_;
  while (done_ < n_) {
    arrive();
    if (done_ == n_) break;
    if (opt_.predictor) predict_again();
    Decision d = policy_.decide(state());
    ++res_.decisions;
    if (!d.empty()) apply(d);
    SchedState after = state();
    if (opt_.observer) opt_.observer(after, d);
    advance(next_event(d, after));
    finish();
  }
  return collect();
}

// The jobs submitted by now, and the deferred ones whose next submission came, join the queue if
// admission control lets them.
void Simulation::arrive() {
  while (next_ < n_ && jobs_[arrival_[next_]].spec.submit <= t_ + kEps) {
    Job& j = jobs_[arrival_[next_++]];
    // An arrival up to kEps after the clock (a completion or wake-up that floating point put just
    // short of the arrival's second) is taken at its own time, not before it: a policy must never
    // see a job submitted after the moment it decides at (the learned policy's history refused
    // one, and a job could start before its submission).
    if (j.spec.submit > t_) advance(j.spec.submit);
    if (opt_.predictor) j.spec.estimate = predicted_[j.id] = opt_.predictor->predict(features(j));
    if (admit(j)) enqueue(j, j.spec.submit);
  }
  while (!resubmits_.empty() && resubmits_.front().at <= t_ + kEps) {
    Job& j = jobs_[pop(resubmits_).id];
    j.spec.submit = t_;  // a new submission: it queues from now
    if (admit(j)) enqueue(j, t_);
  }
}

// Puts an arriving job to admission control; false when it does not join the queue now.
bool Simulation::admit(Job& j) {
  if (!opt_.admission) return true;
  opt_.admission->arrived(j, t_);
  const AdmissionAnswer a = opt_.admission->decide(state(), j, deferrals_[j.id]);
  if (a.verdict == Verdict::kAdmit) {
    admitted_at_[j.id] = t_;
    est_q_[j.id] = a.estimate.queueing;
    est_l_[j.id] = a.estimate.lookahead;
    return true;
  }
  if (a.verdict == Verdict::kDefer) {
    ++deferrals_[j.id];
    push(resubmits_, {a.resubmit_at, j.id, 0, -1});
  } else {
    refused_[j.id] = 1;
    j.status = JobStatus::kDone;
    policy_.forget(j.id);
    opt_.admission->forget(j.id);
    ++done_;
  }
  return false;
}

// A job that outlived its prediction is predicted again, from what it has run.
void Simulation::predict_again() {
  outlived_.clear();
  while (!outlives_.empty() && outlives_.front().at <= t_ + kEps) outlived_.push_back(pop(outlives_));
  for (const Due& o : outlived_) {
    if (!current(o)) continue;
    Job& j = jobs_[o.id];
    j.spec.estimate = opt_.predictor->predict_given(features(j), t_, j.work(t_));
    push(outlives_, {outlive_at(j), j.id, start_seq_[j.id], j.spec.estimate});
  }
}

void Simulation::apply(const Decision& d) {
  apply_decision(d, policy_.name(), *this);
  if (!d.start.empty()) {
    std::erase_if(waiting_, [&](const Job* j) { return drop_[j->id]; });
    for (const Start& st : d.start) drop_[st.job] = 0;
  }
}

void Simulation::preempt(JobId id) {
  Job& j = jobs_[id];
  j.preemptions += 1;
  j.overhead += opt_.preempt_cost + opt_.restart_delay + lost_work(j, t_);
  j.executed = j.executed_at(t_);
  wall_run_[j.id] += t_ - j.last_start;
  remove_running(j);
  if (opt_.stop_delay > 0) {
    j.status = JobStatus::kPending;  // in neither list, as the daemon's stopping jobs
    j.stopping_until = t_ + opt_.stop_delay;
    stopping_.push_back(&j);
  } else {
    cluster_.release(j);
    j.devices.clear();
    enqueue(j, t_);
  }
}

void Simulation::start(JobId id, const Placement& placement) {
  Job& j = jobs_[id];
  try {
    j.devices = cluster_.allocate(j, placement);
  } catch (const Error& e) {
    EMBER_FAIL("policy '", policy_.name(), "': ", e.what());
  }
  j.status = JobStatus::kRunning;
  j.overhead += opt_.start_delay;
  j.last_start = t_;
  j.rate = rate_on(j, placement);
  if (j.first_start < 0) {
    j.first_start = t_;
    if (opt_.admission && admitted_at_[j.id] >= 0) opt_.admission->started(est_l_[j.id], t_ - admitted_at_[j.id]);
  }
  drop_[j.id] = 1;  // leaves the queue after the decision (one pass over it, not one per start)
  add_running(j);
  const long run = start_seq_[j.id] = ++starts_;
  push(completions_, {t_ + std::max(0.0, truth_[j.id] + j.overhead - j.executed) / j.rate, j.id, run, -1});
  if (opt_.predictor) push(outlives_, {outlive_at(j), j.id, run, j.spec.estimate});
}

// The time of the next event after decision `d`, which left the state `after`. Throws when there
// is none although jobs wait.
double Simulation::next_event(const Decision& d, const SchedState& after) {
  while (!completions_.empty() && !current(completions_.front())) pop(completions_);
  double t_next = next_ < n_ ? jobs_[arrival_[next_]].spec.submit : kInf;
  if (!resubmits_.empty()) t_next = std::min(t_next, resubmits_.front().at);
  if (!completions_.empty()) t_next = std::min(t_next, std::max(t_, completions_.front().at));
  for (const Job* j : stopping_) t_next = std::min(t_next, j->stopping_until);
  double wake = policy_.next_wakeup(after);
  if (wake > t_ + kEps) t_next = std::min(t_next, wake);
  // Nothing running or stopping and nothing to arrive: only the policy can start a job now. One
  // that never does, at no wake-up or at many in a row, would leave the run without an end.
  const bool idle = running_.empty() && stopping_.empty() && next_ >= n_ && resubmits_.empty() && !waiting_.empty();
  idle_wakeups_ = idle && d.start.empty() ? idle_wakeups_ + 1 : 0;
  if (t_next == kInf || idle_wakeups_ > kMaxIdleWakeups) {
    EMBER_FAIL("policy '", policy_.name(), "' left ", waiting_.size(), " job(s) waiting at t=", t_,
               " with nothing running and no arrivals to come (first: '",
               waiting_.empty() ? "" : waiting_.front()->spec.name, "', ",
               waiting_.empty() ? 0 : waiting_.front()->spec.gpus, " device(s))");
  }
  return t_next;
}

// The clock moves on to `to`, counting the devices held meanwhile.
void Simulation::advance(double to) {
  const int busy = cluster_.busy();
  busy_area_ += busy * std::max(0.0, std::min(to, window1_) - std::max(t_, window0_));
  whole_area_ += busy * (to - t_);
  t_ = to;
}

// The jobs whose work is done by now end, and the preempted jobs whose exit came wait again.
void Simulation::finish() {
  // Jobs ending at the same instant are told to the policy and the predictor in the order they
  // started (what a history window keeps depends on it).
  ending_.clear();
  while (!completions_.empty() && completions_.front().at <= t_ + kEps) {
    const Due c = pop(completions_);
    if (current(c)) ending_.push_back(c.id);
  }
  std::sort(ending_.begin(), ending_.end(), [&](JobId a, JobId b) { return start_seq_[a] < start_seq_[b]; });
  for (JobId id : ending_) {
    Job& j = jobs_[id];
    j.executed = j.executed_at(t_);
    wall_run_[j.id] += t_ - j.last_start;
    remove_running(j);
    cluster_.release(j);
    j.devices.clear();
    j.status = JobStatus::kDone;
    j.finish = t_;
    policy_.job_finished(j);
    if (opt_.predictor) opt_.predictor->observe(features(j), truth_[j.id], t_);
    if (opt_.admission) opt_.admission->finished(j, truth_[j.id], t_);
    policy_.forget(j.id);
    ++done_;
  }
  std::erase_if(stopping_, [&](Job* j) {
    if (j->stopping_until > t_ + kEps) return false;
    cluster_.release(*j);
    j->devices.clear();
    j->stopping_until = -1;
    enqueue(*j, t_);
    return true;
  });
}

SimResult Simulation::collect() {
  res_.jobs.resize(n_);
  for (size_t i = 0; i < n_; ++i) {
    const Job& j = jobs_[i];
    JobResult& r = res_.jobs[i];
    r.name = j.spec.name;
    r.queue = j.spec.queue;
    r.submit = first_submit_[i];
    r.duration = truth_[i];
    r.gpus = j.spec.gpus;
    r.first_start = j.first_start;
    r.finish = j.finish;
    r.run_time = opt_.speed ? wall_run_[i] : j.executed;
    r.preemptions = j.preemptions;
    if (opt_.admission) {
      r.refused = refused_[i] != 0;
      r.deferrals = deferrals_[i];
      r.admitted_at = admitted_at_[i];
      r.estimate_queueing = est_q_[i];
      r.estimate_lookahead = est_l_[i];
    }
  }
  if (opt_.admission) res_.admission = admission_stats(res_.jobs, opt_.admission->options().target);
  res_.metrics = compute_metrics(res_.jobs, busy_fraction());
  res_.counters = policy_.counters();
  if (opt_.predictor) res_.prediction_error = median_abs_log_error(predicted_, truth_);
  res_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  res_.cpu_seconds = process_cpu_seconds() - cpu0_;
  return std::move(res_);
}

// Device-seconds used over those available between the first and the last arrival.
double Simulation::busy_fraction() const {
  const double window = window1_ - window0_;
  if (window > 0) return busy_area_ / (window * topo_.num_devices());
  // Every job arrived at once: use the whole run instead.
  double span = 0;
  for (const JobResult& r : res_.jobs) span = std::max(span, r.finish - window0_);
  return span > 0 ? whole_area_ / (span * topo_.num_devices()) : 0;
}

}  // namespace

Metrics compute_metrics(const std::vector<JobResult>& jobs, double busy_fraction) {
  Metrics m;
  m.busy_fraction = busy_fraction;
  if (jobs.empty()) return m;
  std::vector<double> jct;
  double first = kInf, last = -kInf, delay = 0, pre = 0;
  for (const JobResult& j : jobs) {
    if (j.refused) continue;
    jct.push_back(j.jct());
    first = std::min(first, j.submit);
    last = std::max(last, j.finish);
    delay += j.queue_delay();
    pre += j.preemptions;
    if (j.duration > 0) m.max_slowdown = std::max(m.max_slowdown, j.jct() / j.duration);
  }
  if (jct.empty()) return m;
  double sum = 0;
  for (double x : jct) sum += x;
  const double n = static_cast<double>(jct.size());
  m.avg_jct = sum / n;
  m.p50_jct = percentile(jct, 0.50);
  m.p99_jct = percentile(std::move(jct), 0.99);
  m.makespan = last - first;
  m.avg_queue_delay = delay / n;
  m.preemptions_per_job = pre / n;
  return m;
}

AdmissionStats admission_stats(const std::vector<JobResult>& jobs, double target) {
  AdmissionStats a;
  a.target = target;
  std::vector<double> err, qerr, abs_err, delayed_err;
  long met = 0;
  for (const JobResult& j : jobs) {
    a.deferrals += j.deferrals;
    if (j.refused) {
      ++a.refused;
      continue;
    }
    if (j.admitted_at < 0) continue;
    ++a.admitted;
    const double actual = std::max(0.0, j.first_start - j.admitted_at);
    met += actual <= target + kEps;
    const double scale = std::max(actual, 60.0);
    err.push_back(std::abs(j.estimate_lookahead - actual) / scale);
    qerr.push_back(std::abs(j.estimate_queueing - actual) / scale);
    abs_err.push_back(std::abs(j.estimate_lookahead - actual));
    if (actual >= 60) delayed_err.push_back(err.back());
  }
  a.delayed = static_cast<long>(delayed_err.size());
  a.delayed_error_median = percentile(delayed_err, 0.5);
  a.delayed_error_p90 = percentile(delayed_err, 0.9);
  a.fraction_admitted = jobs.empty() ? 0 : static_cast<double>(a.admitted) / jobs.size();
  a.slo_attainment = a.admitted ? static_cast<double>(met) / a.admitted : 0;
  a.error_median = percentile(err, 0.5);
  a.error_p90 = percentile(err, 0.9);
  a.queueing_error_median = percentile(qerr, 0.5);
  a.queueing_error_p90 = percentile(qerr, 0.9);
  a.abs_error_median = percentile(abs_err, 0.5);
  return a;
}

SimResult simulate(const std::vector<JobSpec>& trace, const Topology& topo, Policy& policy, const SimOptions& opt) {
  return Simulation(trace, topo, policy, opt).run();
}

}  // namespace ember::sched
