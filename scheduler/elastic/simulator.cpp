#include "scheduler/elastic/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "scheduler/stats.h"

namespace ember::sched::elastic {
namespace {

// Runs `j` for `seconds` from `t`: first what is left of its restart, then at its goodput epoch by
// epoch (the gradient statistics change per epoch). An epoch's end is rounded to the second, as the
// artifact's simulator does; the job finishes at the end of its measured run's last epoch.
void advance(EJob& j, double t, double seconds) {
  if (j.alloc.empty() || j.finish >= 0) return;
  const double g = j.gpus(), b = static_cast<double>(j.batch.global(j.gpus()));
  const auto hold = [&](double dt) {
    j.attained += dt * g;
    j.held_time += dt;
    j.gpu_time += dt * g;
    j.batch_time += dt * b;
  };
  const double delay = std::min(j.restart_left, seconds);
  j.restart_left -= delay;
  hold(delay);
  t += delay;
  seconds -= delay;
  const Shape shape = j.shape();
  while (seconds > 0 && j.finish < 0) {
    const double rate = j.goodput(shape, j.batch);
    const double next = j.app->progress_at(j.epoch + 1);
    if (j.progress + rate * seconds < next) {
      j.progress += rate * seconds;
      hold(seconds);
      return;
    }
    const double dt = std::min(std::round((next - j.progress) / rate), seconds);
    ++j.epoch;
    j.progress = next;
    hold(dt);
    t += dt;
    seconds -= dt;
    if (j.epoch >= j.app->limits().epochs) j.finish = t;
  }
}

void check_assignment(const ElasticPolicy& p, const EJob& j, const Assignment& a, const SimConfig& cfg,
                      std::vector<int>& used) {
  for (int n : a.nodes) {
    EMBER_CHECK(n >= 0 && n < cfg.nodes, "policy ", p.name(), ": job ", j.req.name, " given node ", n, " of ",
                cfg.nodes);
    EMBER_CHECK(++used[static_cast<size_t>(n)] <= cfg.gpus_per_node, "policy ", p.name(), ": node ", n,
                " given more than its ", cfg.gpus_per_node, " GPUs");
  }
  if (a.nodes.empty()) return;
  const AppLimits& l = j.app->limits();
  const long b = a.batch.global(static_cast<int>(a.nodes.size()));
  EMBER_CHECK(a.batch.atomic >= 1 && a.batch.accum >= 0 && b >= l.init_batch && b <= l.max_batch, "policy ", p.name(),
              ": job ", j.req.name, " given per-GPU batch ", a.batch.atomic, " x ", a.batch.accum + 1, " on ",
              a.nodes.size(), " GPUs: global ", b, " is outside [", l.init_batch, ", ", l.max_batch, "]");
  if (j.req.rigid)
    EMBER_CHECK(static_cast<int>(a.nodes.size()) == j.req.gpus, "policy ", p.name(), ": rigid job ", j.req.name,
                " given ", a.nodes.size(), " GPUs, not its ", j.req.gpus);
}

void apply(EJob& j, const Assignment& a, const SimConfig& cfg) {
  if (a.nodes == j.alloc) {
    j.batch = a.batch;  // a new batch at the same GPUs needs no restart
    return;
  }
  j.alloc = a.nodes;
  j.batch = a.batch;
  if (a.nodes.empty()) return;
  j.restart_left = cfg.restart_delay;
  ++j.restarts;
  j.max_gpus = std::max(j.max_gpus, j.gpus());
}

ElasticResult summarise(const std::vector<EJob>& jobs, const SimConfig& cfg) {
  ElasticResult r;
  double first = jobs.front().req.submit, last = 0, gpu_seconds = 0;
  std::vector<double> jcts;
  for (const EJob& j : jobs) {
    ElasticJobResult o{j.req.name, j.req.app, j.req.submit, j.finish};
    o.mean_gpus = j.held_time > 0 ? j.gpu_time / j.held_time : 0;
    o.mean_batch = j.held_time > 0 ? j.batch_time / j.held_time : 0;
    o.restarts = std::max(j.restarts, 0);
    first = std::min(first, j.req.submit);
    last = std::max(last, j.finish);
    gpu_seconds += j.gpu_time;
    jcts.push_back(o.jct());
    r.avg_jct += o.jct() / static_cast<double>(jobs.size());
    r.mean_gpus += o.mean_gpus / static_cast<double>(jobs.size());
    r.mean_batch += o.mean_batch / static_cast<double>(jobs.size());
    r.mean_restarts += o.restarts / static_cast<double>(jobs.size());
    r.jobs.push_back(o);
  }
  r.p99_jct = percentile(jcts, 0.99);
  r.makespan = last - first;
  r.utilisation = r.makespan > 0 ? gpu_seconds / (r.makespan * cfg.nodes * cfg.gpus_per_node) : 0;
  return r;
}

}  // namespace

Shape EJob::shape() const {
  Shape s;
  for (size_t i = 0; i < alloc.size(); ++i) {
    if (i == 0 || alloc[i] != alloc[i - 1])
      s.push_back(1);
    else
      ++s.back();
  }
  return s;
}

double EJob::goodput(const Shape& s, const BatchConfig& cfg) const {
  int g = 0;
  for (int n : s) g += n;
  if (g == 0) return 0;
  const StepTime t = app->step_time(s, cfg.atomic);
  const double batch = static_cast<double>(cfg.global(g));
  const double gain = progress_gain(app->grad_stats(batch, epoch), batch / app->limits().init_batch);
  return gain / (t.step + (t.step - t.sync) * cfg.accum);
}

ElasticResult simulate_elastic(const std::vector<JobRequest>& workload, const std::map<std::string, AppModel>& apps,
                               ElasticPolicy& policy, const SimConfig& cfg) {
  EMBER_CHECK(!workload.empty(), "elastic simulation: the workload has no jobs");
  EMBER_CHECK(cfg.nodes >= 1 && cfg.gpus_per_node >= 1 && cfg.interval > 0 && cfg.restart_delay >= 0,
              "elastic simulation: expected >= 1 node of >= 1 GPU, an interval > 0 and a restart delay >= 0");
  std::vector<EJob> jobs;
  for (const JobRequest& q : workload) {
    const auto app = apps.find(q.app);
    EMBER_CHECK(app != apps.end(), "elastic simulation: job ", q.name, " trains unknown app '", q.app, "'");
    EMBER_CHECK(q.gpus <= cfg.nodes * cfg.gpus_per_node, "elastic simulation: job ", q.name, " asks for ", q.gpus,
                " GPUs, more than the cluster's ", cfg.nodes * cfg.gpus_per_node);
    jobs.push_back({.id = static_cast<int>(jobs.size()), .req = q, .app = &app->second});
  }
  double now = 0, decide_total = 0, decide_max = 0;
  long rounds = 0, idle_rounds = 0;
  size_t done = 0;
  while (done < jobs.size()) {
    for (EJob& j : jobs) advance(j, now, cfg.interval);
    now += cfg.interval;
    RoundState s{now, &cfg, {}};
    done = 0;
    for (EJob& j : jobs) {
      if (j.finish >= 0) {
        j.alloc.clear();  // a finished job's GPUs are free from this round on
        ++done;
      } else if (j.req.submit <= now) {
        s.active.push_back(&j);
      }
    }
    if (s.active.empty()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Assignment> plan = policy.decide(s);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    decide_total += dt;
    decide_max = std::max(decide_max, dt);
    ++rounds;
    EMBER_CHECK(plan.size() == s.active.size(), "policy ", policy.name(), ": ", plan.size(), " assignments for ",
                s.active.size(), " active jobs");
    std::vector<int> used(static_cast<size_t>(cfg.nodes), 0);
    bool any = false;
    for (size_t i = 0; i < plan.size(); ++i) {
      check_assignment(policy, *s.active[i], plan[i], cfg, used);
      any = any || !plan[i].nodes.empty();
    }
    for (size_t i = 0; i < plan.size(); ++i) apply(jobs[static_cast<size_t>(s.active[i]->id)], plan[i], cfg);
    idle_rounds = any ? 0 : idle_rounds + 1;
    EMBER_CHECK(idle_rounds < 1000, "policy ", policy.name(), ": left ", s.active.size(),
                " jobs without GPUs on an idle cluster for 1000 rounds");
  }
  ElasticResult r = summarise(jobs, cfg);
  r.policy = policy.name();
  r.rounds = rounds;
  r.decide_max_s = decide_max;
  r.decide_mean_s = rounds ? decide_total / static_cast<double>(rounds) : 0;
  return r;
}

}  // namespace ember::sched::elastic
