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

// The simulator's side of apply_decision(): its jobs, indexed by id, on its clock.
class SimTarget : public DecisionTarget {
 public:
  using PreemptFn = std::function<void(Job&)>;
  using StartFn = std::function<void(Job&, const Placement&)>;
  SimTarget(std::vector<Job>& jobs, const Cluster& cluster, const std::vector<Job*>& stopping, const double& now,
            PreemptFn preempt, StartFn start)
      : jobs_(jobs), cluster_(cluster), stopping_(stopping), now_(now), preempt_(preempt), start_(start) {}
  bool running(JobId id) const override { return known(id) && jobs_[id].status == JobStatus::kRunning; }
  bool waiting(JobId id) const override { return known(id) && jobs_[id].status == JobStatus::kWaiting; }
  bool stopping(JobId id) const override { return jobs_[id].stopping_until > now_; }
  bool any_stopping() const override { return !stopping_.empty(); }
  const Job& job(JobId id) const override { return jobs_[id]; }
  const Cluster& cluster() const override { return cluster_; }
  void preempt(JobId id) override { preempt_(jobs_[id]); }
  void start(JobId id, const Placement& p) override { start_(jobs_[id], p); }

 private:
  bool known(JobId id) const { return id >= 0 && static_cast<size_t>(id) < jobs_.size(); }
  std::vector<Job>& jobs_;
  const Cluster& cluster_;
  const std::vector<Job*>& stopping_;
  const double& now_;
  PreemptFn preempt_;
  StartFn start_;
};

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
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  EMBER_CHECK(opt.preempt_cost >= 0, "simulate: preemption cost must be >= 0 seconds, got ", opt.preempt_cost);
  EMBER_CHECK(opt.stop_delay >= 0 && opt.restart_delay >= 0 && opt.checkpoint_interval >= 0 && opt.start_delay >= 0,
              "simulate: the stop delay, restart delay, checkpoint interval and start delay must be >= 0 seconds, got ",
              opt.stop_delay, ", ", opt.restart_delay, ", ", opt.checkpoint_interval, " and ", opt.start_delay);
  const size_t n = trace.size();
  std::vector<Job> jobs(n);
  std::vector<double> predicted(opt.predictor ? n : 0), truth(n);
  for (size_t i = 0; i < n; ++i) {
    jobs[i].id = static_cast<JobId>(i);
    jobs[i].spec = trace[i];
    truth[i] = trace[i].duration;
    if (opt.predictor) jobs[i].spec.duration = jobs[i].spec.estimate = -1;  // told at arrival, from history
    const JobSpec& s = trace[i];
    EMBER_CHECK(s.duration >= 0, "simulate: job '", s.name, "' has no duration; a simulation needs every job's");
    EMBER_CHECK(topo.min_nodes(s.gpus, s.mem_per_gpu) > 0, "simulate: job '", s.name, "' needs ", s.gpus, " devices",
                s.mem_per_gpu > 0 ? " with enough memory" : "", " but the cluster has ", topo.num_devices(), " in ",
                topo.num_nodes(), " node(s); it could never run");
  }
  std::vector<size_t> arrival(n);
  for (size_t i = 0; i < n; ++i) arrival[i] = i;
  std::stable_sort(arrival.begin(), arrival.end(),
                   [&](size_t a, size_t b) { return jobs[a].spec.submit < jobs[b].spec.submit; });

  Cluster cluster(topo);
  std::vector<const Job*> waiting, running;
  std::vector<long> running_pos(n, -1);  // where each running job sits in `running`: O(1) removal
  std::vector<Job*> stopping;            // preempted, still holding their devices (opt.stop_delay > 0)
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
  std::vector<long> start_seq(n, 0);  // the start that began each job's current run
  long starts = 0;
  std::vector<JobId> ending;
  std::vector<Due> completions, outlives;
  auto push = [](std::vector<Due>& h, Due d) {
    h.push_back(d);
    std::push_heap(h.begin(), h.end(), std::greater<>());
  };
  auto pop = [](std::vector<Due>& h) {
    std::pop_heap(h.begin(), h.end(), std::greater<>());
    Due d = h.back();
    h.pop_back();
    return d;
  };
  SimResult res;
  res.policy = policy.name();
  res.traits = policy.traits();
  res.knows = res.traits.clairvoyant ? (opt.predictor ? "predictions" : "durations")
                                     : (res.traits.learns ? "history" : "nothing");
  res.gpus = topo.num_devices();
  res.preempt_cost = opt.preempt_cost;
  if (n == 0) return res;

  const double window0 = jobs[arrival.front()].spec.submit, window1 = jobs[arrival.back()].spec.submit;
  double busy_area = 0, whole_area = 0;  // device-seconds used inside the arrival window / over the whole run
  auto current = [&](const Due& d) {
    const Job& j = jobs[d.id];
    return j.status == JobStatus::kRunning && start_seq[d.id] == d.run &&
           (d.estimate < 0 || j.spec.estimate == d.estimate);
  };
  auto lost_work = [&](const Job& j, double now) {
    const double every = j.spec.checkpoint_interval >= 0 ? j.spec.checkpoint_interval : opt.checkpoint_interval;
    return work_lost_to_preemption(j.work(now), every);
  };
  // When a running job's work will reach its prediction (the simulator then predicts it again).
  auto outlive_at = [&](const Job& j) { return j.last_start + (j.spec.estimate + j.overhead - j.executed) / j.rate; };
  // Wall seconds each job held devices (its work is counted in reference-type seconds, `executed`).
  std::vector<double> wall_run(n, 0);
  auto rate_on = [&](const Job& j, const Placement& p) {
    if (!opt.speed) return 1.0;
    double r = kInf;
    for (const Slice& sl : p) r = std::min(r, opt.speed(j.spec, topo.node(sl.node).type));
    EMBER_CHECK(r > 0 && r < kInf, "simulate: job '", j.spec.name, "' has speed ", r, " on its devices");
    return r;
  };
  auto enqueue = [&](Job& j, double at) {
    j.status = JobStatus::kWaiting;
    j.queued_since = at;
    waiting.insert(std::upper_bound(waiting.begin(), waiting.end(), &j, submit_order), &j);
  };
  auto add_running = [&](Job& j) {
    running_pos[j.id] = static_cast<long>(running.size());
    running.push_back(&j);
  };
  auto remove_running = [&](const Job& j) {
    const long at = running_pos[j.id];
    running[at] = running.back();
    running_pos[running[at]->id] = at;
    running.pop_back();
    running_pos[j.id] = -1;
  };
  auto features = [](const Job& j) { return SubmitFeatures{j.spec.queue, j.spec.gpus, j.spec.submit}; };
  auto state = [&](double t) {
    SchedState st;
    st.now = t;
    st.cluster = &cluster;
    st.waiting = waiting;
    st.running = running;
    st.preempt_cost = opt.preempt_cost;
    st.speed = opt.speed ? &opt.speed : nullptr;
    return st;
  };

  double t = window0;
  size_t next = 0, done = 0;
  long idle_wakeups = 0;  // decisions in a row that started nothing on an idle cluster
  std::vector<char> drop(n, 0);
  std::vector<Due> outlived;
  // Admission control's bookkeeping: deferred jobs' next submissions (a min-heap), and per job.
  std::vector<Due> resubmits;
  std::vector<char> refused(opt.admission ? n : 0, 0);
  std::vector<int> deferrals(opt.admission ? n : 0, 0);
  std::vector<double> admitted_at(opt.admission ? n : 0, -1), est_q(admitted_at), est_l(admitted_at);
  std::vector<double> first_submit(n);
  for (size_t i = 0; i < n; ++i) first_submit[i] = jobs[i].spec.submit;
  // Puts an arriving job to admission control; false when it does not join the queue now.
  auto admit = [&](Job& j) {
    if (!opt.admission) return true;
    opt.admission->arrived(j, t);
    const AdmissionAnswer a = opt.admission->decide(state(t), j, deferrals[j.id]);
    if (a.verdict == Verdict::kAdmit) {
      admitted_at[j.id] = t;
      est_q[j.id] = a.estimate.queueing;
      est_l[j.id] = a.estimate.lookahead;
      return true;
    }
    if (a.verdict == Verdict::kDefer) {
      ++deferrals[j.id];
      push(resubmits, {a.resubmit_at, j.id, 0, -1});
    } else {
      refused[j.id] = 1;
      j.status = JobStatus::kDone;
      policy.forget(j.id);
      opt.admission->forget(j.id);
      ++done;
    }
    return false;
  };
  // The clock moves on to `to`, counting the devices held meanwhile.
  auto advance = [&](double to) {
    const int busy = cluster.busy();
    busy_area += busy * std::max(0.0, std::min(to, window1) - std::max(t, window0));
    whole_area += busy * (to - t);
    t = to;
  };
  // What a preemption and a start do to a simulated job (apply_decision() says which happen).
  auto preempt = [&](Job& j) {
    j.preemptions += 1;
    j.overhead += opt.preempt_cost + opt.restart_delay + lost_work(j, t);
    j.executed = j.executed_at(t);
    wall_run[j.id] += t - j.last_start;
    remove_running(j);
    if (opt.stop_delay > 0) {
      j.status = JobStatus::kPending;  // in neither list, as the daemon's stopping jobs
      j.stopping_until = t + opt.stop_delay;
      stopping.push_back(&j);
    } else {
      cluster.release(j);
      j.devices.clear();
      enqueue(j, t);
    }
  };
  auto start = [&](Job& j, const Placement& placement) {
    try {
      j.devices = cluster.allocate(j, placement);
    } catch (const Error& e) {
      EMBER_FAIL("policy '", policy.name(), "': ", e.what());
    }
    j.status = JobStatus::kRunning;
    j.overhead += opt.start_delay;
    j.last_start = t;
    j.rate = rate_on(j, placement);
    if (j.first_start < 0) {
      j.first_start = t;
      if (opt.admission && admitted_at[j.id] >= 0) opt.admission->started(est_l[j.id], t - admitted_at[j.id]);
    }
    drop[j.id] = 1;
    add_running(j);
    const long run = start_seq[j.id] = ++starts;
    push(completions, {t + std::max(0.0, truth[j.id] + j.overhead - j.executed) / j.rate, j.id, run, -1});
    if (opt.predictor) push(outlives, {outlive_at(j), j.id, run, j.spec.estimate});
  };
  while (done < n) {
    while (next < n && jobs[arrival[next]].spec.submit <= t + kEps) {
      Job& j = jobs[arrival[next++]];
      // An arrival up to kEps after the clock (a completion or wake-up that floating point put just
      // short of the arrival's second) is taken at its own time, not before it: a policy must never
      // see a job submitted after the moment it decides at (the learned policy's history refused
      // one, and a job could start before its submission).
      if (j.spec.submit > t) advance(j.spec.submit);
      if (opt.predictor) j.spec.estimate = predicted[j.id] = opt.predictor->predict(features(j));
      if (admit(j)) enqueue(j, j.spec.submit);
    }
    while (!resubmits.empty() && resubmits.front().at <= t + kEps) {
      Job& j = jobs[pop(resubmits).id];
      j.spec.submit = t;  // a new submission: it queues from now
      if (admit(j)) enqueue(j, t);
    }
    if (done == n) break;

    if (opt.predictor) {  // a job that outlived its prediction is predicted again, from what it has run
      outlived.clear();
      while (!outlives.empty() && outlives.front().at <= t + kEps) outlived.push_back(pop(outlives));
      for (const Due& o : outlived) {
        if (!current(o)) continue;
        Job& j = jobs[o.id];
        j.spec.estimate = opt.predictor->predict_given(features(j), t, j.work(t));
        push(outlives, {outlive_at(j), j.id, start_seq[j.id], j.spec.estimate});
      }
    }
    Decision d = policy.decide(state(t));
    ++res.decisions;
    if (!d.empty()) {
      SimTarget target(jobs, cluster, stopping, t, preempt, start);
      apply_decision(d, policy.name(), target);
      if (!d.start.empty()) {
        std::erase_if(waiting, [&](const Job* j) { return drop[j->id]; });
        for (const Start& st : d.start) drop[st.job] = 0;
      }
    }
    SchedState after = state(t);
    if (opt.observer) opt.observer(after, d);

    while (!completions.empty() && !current(completions.front())) pop(completions);
    double t_next = next < n ? jobs[arrival[next]].spec.submit : kInf;
    if (!resubmits.empty()) t_next = std::min(t_next, resubmits.front().at);
    if (!completions.empty()) t_next = std::min(t_next, std::max(t, completions.front().at));
    for (const Job* j : stopping) t_next = std::min(t_next, j->stopping_until);
    double wake = policy.next_wakeup(after);
    if (wake > t + kEps) t_next = std::min(t_next, wake);
    // Nothing running or stopping and nothing to arrive: only the policy can start a job now. One
    // that never does, at no wake-up or at many in a row, would leave the run without an end.
    const bool idle = running.empty() && stopping.empty() && next >= n && resubmits.empty() && !waiting.empty();
    idle_wakeups = idle && d.start.empty() ? idle_wakeups + 1 : 0;
    if (t_next == kInf || idle_wakeups > kMaxIdleWakeups) {
      EMBER_FAIL("policy '", policy.name(), "' left ", waiting.size(), " job(s) waiting at t=", t,
                 " with nothing running and no arrivals to come (first: '",
                 waiting.empty() ? "" : waiting.front()->spec.name, "', ",
                 waiting.empty() ? 0 : waiting.front()->spec.gpus, " device(s))");
    }
    advance(t_next);

    // Jobs ending at the same instant are told to the policy and the predictor in the order they
    // started (what a history window keeps depends on it).
    ending.clear();
    while (!completions.empty() && completions.front().at <= t + kEps) {
      const Due c = pop(completions);
      if (current(c)) ending.push_back(c.id);
    }
    std::sort(ending.begin(), ending.end(), [&](JobId a, JobId b) { return start_seq[a] < start_seq[b]; });
    for (JobId id : ending) {
      Job& j = jobs[id];
      j.executed = j.executed_at(t);
      wall_run[j.id] += t - j.last_start;
      remove_running(j);
      cluster.release(j);
      j.devices.clear();
      j.status = JobStatus::kDone;
      j.finish = t;
      policy.job_finished(j);
      if (opt.predictor) opt.predictor->observe(features(j), truth[j.id], t);
      if (opt.admission) opt.admission->finished(j, truth[j.id], t);
      policy.forget(j.id);
      ++done;
    }
    // Preempted jobs whose exit came: their devices are free and they wait again.
    std::erase_if(stopping, [&](Job* j) {
      if (j->stopping_until > t + kEps) return false;
      cluster.release(*j);
      j->devices.clear();
      j->stopping_until = -1;
      enqueue(*j, t);
      return true;
    });
  }

  res.jobs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Job& j = jobs[i];
    JobResult& r = res.jobs[i];
    r.name = j.spec.name;
    r.queue = j.spec.queue;
    r.submit = first_submit[i];
    r.duration = truth[i];
    r.gpus = j.spec.gpus;
    r.first_start = j.first_start;
    r.finish = j.finish;
    r.run_time = opt.speed ? wall_run[i] : j.executed;
    r.preemptions = j.preemptions;
    if (opt.admission) {
      r.refused = refused[i] != 0;
      r.deferrals = deferrals[i];
      r.admitted_at = admitted_at[i];
      r.estimate_queueing = est_q[i];
      r.estimate_lookahead = est_l[i];
    }
  }
  if (opt.admission) res.admission = admission_stats(res.jobs, opt.admission->options().target);
  const double window = window1 - window0;
  double busy_fraction;
  if (window > 0) {
    busy_fraction = busy_area / (window * topo.num_devices());
  } else {  // every job arrived at once: use the whole run instead
    double span = 0;
    for (const JobResult& r : res.jobs) span = std::max(span, r.finish - window0);
    busy_fraction = span > 0 ? whole_area / (span * topo.num_devices()) : 0;
  }
  res.metrics = compute_metrics(res.jobs, busy_fraction);
  res.counters = policy.counters();
  if (opt.predictor) res.prediction_error = median_abs_log_error(predicted, truth);
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  res.cpu_seconds = process_cpu_seconds() - cpu0;
  return res;
}

}  // namespace ember::sched
