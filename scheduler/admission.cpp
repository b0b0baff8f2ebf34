#include "scheduler/admission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "scheduler/cluster.h"
#include "scheduler/ranking.h"
#include "scheduler/stats.h"

namespace ember::sched {

double erlang_c(int servers, double offered) {
  EMBER_CHECK(servers >= 1 && offered >= 0 && offered < servers, "Erlang C: expected 0 <= offered load < servers, got ",
              offered, " on ", servers, " server(s)");
  // Erlang B by its recurrence (stable for thousands of servers), then C from B.
  double b = 1;
  for (int k = 1; k <= servers; ++k) b = offered * b / (k + offered * b);
  return servers * b / (servers - offered * (1 - b));
}

double mmc_wait(int servers, double lambda, double mean_service) {
  EMBER_CHECK(lambda >= 0 && mean_service > 0, "M/M/c: expected an arrival rate >= 0 and a mean service > 0, got ",
              lambda, " and ", mean_service);
  const double a = lambda * mean_service;
  if (a >= servers) return kInf;  // the queue grows without end
  return erlang_c(servers, a) * mean_service / (servers - a);
}

double mgc_wait(int servers, double lambda, double mean_service, double scv) {
  EMBER_CHECK(scv >= 0, "M/G/c: expected a squared coefficient of variation >= 0, got ", scv);
  return mmc_wait(servers, lambda, mean_service) * (1 + scv) / 2;
}

AdmissionControl::AdmissionControl(AdmissionOptions opt, Policy* policy)
    : opt_(opt),
      policy_(policy),
      preemptive_(dynamic_cast<RankingPolicy*>(policy) && policy->traits().preemptive),
      strict_(policy && policy->traits().strict_order),
      predictor_(opt.predictor) {
  EMBER_CHECK(opt_.target >= 0, "admission: the target start delay must be >= 0 seconds, got ", opt_.target);
  EMBER_CHECK(opt_.slo > 0 && opt_.slo <= 1, "admission: the SLO must be a fraction in (0, 1], got ", opt_.slo);
  EMBER_CHECK(opt_.max_defers >= 0 && opt_.history >= 2, "admission: expected max_defers >= 0 and history >= 2, got ",
              opt_.max_defers, " and ", opt_.history);
}

void AdmissionControl::arrived(const Job& j, double t) {
  arrivals_.push_back(t);
  if (static_cast<int>(arrivals_.size()) > opt_.history) arrivals_.pop_front();
  // A clock that stepped back (the daemon's is the wall clock) asks as of the newest finish.
  if (opt_.use_estimates && j.spec.estimate > 0) {
    predicted_[j.id] = {j.spec.estimate, Basis::kEstimate};
  } else if (!predicted_.count(j.id)) {
    const SubmitFeatures f{j.spec.queue, j.spec.gpus, std::max(t, newest_)};
    // The predictor answers with its prior until one of the job's groups holds min_samples
    // finishes; the last group, every job's, holds them all.
    const bool learned = static_cast<int>(predictor_.groups(f)[3]->sorted.size()) >= predictor_.options().min_samples;
    predicted_[j.id] = {predictor_.predict(f), learned ? Basis::kHistory : Basis::kPrior};
  }
}

void AdmissionControl::count(Basis b, StartEstimate& e) {
  ++(b == Basis::kEstimate ? e.from_estimates : b == Basis::kHistory ? e.from_history : e.from_prior);
}

double AdmissionControl::remaining(const Job& x, double now, StartEstimate& e) const {
  auto it = predicted_.find(x.id);
  const double total = it != predicted_.end() ? it->second.seconds : mean_service();
  count(it != predicted_.end() ? it->second.basis : mean_basis(), e);
  const double ran = x.work(now);
  return ran < total ? total - ran : std::max(1.0, ran);
}

void AdmissionControl::started(double estimate, double delay) {
  // Starts within the minute are immediate whatever was estimated: they say nothing of the scale.
  if (delay < 60 && estimate < 60) return;
  ratios_.push_back(delay / std::max(estimate, 60.0));
  if (static_cast<int>(ratios_.size()) > opt_.history) ratios_.pop_front();
  calibration_ = percentile(std::vector<double>(ratios_.begin(), ratios_.end()), opt_.slo);
}

void AdmissionControl::finished(const Job& j, double run_time, double t) {
  newest_ = std::max(newest_, t);
  ++finishes_;
  predictor_.observe({j.spec.queue, j.spec.gpus, std::min(j.spec.submit, newest_)}, run_time, newest_);
  predicted_.erase(j.id);
  const int gpus = j.spec.gpus;
  finished_.push_back({gpus, run_time});
  sum_g_ += gpus, sum_gd_ += gpus * run_time, sum_gd2_ += gpus * run_time * run_time;
  if (static_cast<int>(finished_.size()) > opt_.history) {
    const auto [g, d] = finished_.front();
    sum_g_ -= g, sum_gd_ -= g * d, sum_gd2_ -= g * d * d;
    finished_.pop_front();
  }
}

double AdmissionControl::mean_service() const {
  return sum_g_ > 0 && sum_gd_ > 0 ? sum_gd_ / sum_g_ : predictor_.options().prior;
}

double AdmissionControl::service_scv() const {
  if (!(sum_g_ > 0 && sum_gd_ > 0)) return 1.0;
  const double m = sum_gd_ / sum_g_;
  return std::max(0.0, (sum_gd2_ / sum_g_) / (m * m) - 1);
}

double AdmissionControl::arrival_rate() const {
  if (arrivals_.size() < 2 || arrivals_.back() <= arrivals_.front()) return 0;
  return (arrivals_.size() - 1) / (arrivals_.back() - arrivals_.front());
}

double AdmissionControl::mean_gang() const {
  return finished_.empty() ? 1.0 : sum_g_ / finished_.size();
}

StartEstimate AdmissionControl::estimate(const SchedState& s, const Job& j) const {
  const Topology& topo = s.cluster->topology();
  const int devices = topo.num_devices();
  const double es = mean_service(), scv = service_scv();
  auto* ranking = dynamic_cast<RankingPolicy*>(policy_);
  auto rank = [&](const Job& x) { return ranking ? ranking->rank(x, s.now) : Ranked{x.spec.submit, 0, 0, &x}; };
  // Ranked as the waiting job it is about to be: the preemptive policies put a running job ahead
  // of a waiting one of the same rank, and an arrival (not yet queued) would count as running.
  Job me = j;
  me.status = JobStatus::kWaiting;
  me.queued_since = s.now;
  const Ranked mine = rank(me);
  StartEstimate e;
  e.finished_jobs = finishes_;
  e.prior = predictor_.options().prior;

  std::vector<Ranked> ahead;
  for (const Job* w : s.waiting)
    if (Ranked r = rank(*w); r < mine) ahead.push_back(r);
  std::sort(ahead.begin(), ahead.end());

  FreeMap free = s.cluster->free();
  std::vector<Release> ends;
  for (const Job* r : s.running) {
    if (preemptive_ && !(rank(*r) < mine)) {
      free.give(placement_of(topo, *r));  // it would give way to this job
    } else {
      // It holds its devices until it ends or, under a preemptive policy, falls behind this job.
      const double end = s.now + remaining(*r, s.now, e);
      ends.push_back({preemptive_ ? ranking->ahead_until(*r, mine, s.now, end) : end, placement_of(topo, *r)});
    }
  }
  std::make_heap(ends.begin(), ends.end());

  long need = j.spec.gpus - free.total_free();
  for (const Ranked& r : ahead) need += r.job->spec.gpus;
  e.queueing = need <= 0 ? 0.0 : (static_cast<double>(need) - 1 + (1 + scv) / 2) * es / devices;
  const double lambda_dev = arrival_rate() * mean_gang();
  e.steady = lambda_dev > 0 && lambda_dev * es < devices ? mgc_wait(devices, lambda_dev, es, scv) : kInf;

  // The look-ahead: start the jobs ahead, in order, as devices free.
  std::vector<const Job*> left;
  for (const Ranked& r : ahead) left.push_back(r.job);
  double t = s.now;
  for (;;) {
    start_fitting(s, mine, t, left, free, ends, e);
    const bool blocked = strict_ && !left.empty();
    if (!blocked && j.spec.gpus <= free.total_free() && free.best_fit(j.spec.gpus, j.spec.mem_per_gpu)) break;
    if (ends.empty()) {  // devices held outside the view (jobs still stopping): a mean run more
      t += es;
      count(mean_basis(), e);
      break;
    }
    const double at = ends.front().at;
    while (!ends.empty() && ends.front().at <= at) {
      std::pop_heap(ends.begin(), ends.end());
      free.give(ends.back().where);
      ends.pop_back();
    }
    t = at;
  }
  e.lookahead = t - s.now;
  e.calibrated = e.lookahead < 60 ? e.lookahead : e.lookahead * calibration_;
  return e;
}

void AdmissionControl::start_fitting(const SchedState& s, const Ranked& mine, double t, std::vector<const Job*>& left,
                                     FreeMap& free, std::vector<Release>& ends, StartEstimate& e) const {
  auto* ranking = dynamic_cast<RankingPolicy*>(policy_);
  int skipped = 0;
  std::vector<char> gone(left.size(), 0);
  for (size_t i = 0; i < left.size() && free.total_free() > 0; ++i) {
    const Job& a = *left[i];
    std::optional<Placement> p =
        a.spec.gpus <= free.total_free() ? free.best_fit(a.spec.gpus, a.spec.mem_per_gpu) : std::nullopt;
    if (!p) {
      if (strict_ || ++skipped > 256) break;  // strict FCFS stops at the first; else a bounded walk
      continue;
    }
    free.take(*p);
    double end = t + remaining(a, s.now, e);
    if (preemptive_) {  // as a running job would from t: it gives way once it falls behind
      Job started = a;
      started.status = JobStatus::kRunning;
      started.last_start = s.now;
      end = t + (ranking->ahead_until(started, mine, s.now, s.now + (end - t)) - s.now);
    }
    ends.push_back({end, *p});
    std::push_heap(ends.begin(), ends.end());
    gone[i] = 1;
  }
  size_t k = 0;
  std::erase_if(left, [&](const Job*) { return gone[k++] != 0; });
}

AdmissionAnswer AdmissionControl::decide(const SchedState& s, const Job& j, int defers_so_far) const {
  AdmissionAnswer a;
  a.estimate = estimate(s, j);
  const double d = a.estimate.decision();
  if (d <= opt_.target) return a;
  // Deferred until the calibrated delay would come down to the target: when the look-ahead's
  // first `lookahead - target / calibration` seconds have passed.
  if (opt_.refuse || defers_so_far >= opt_.max_defers) {
    a.verdict = Verdict::kRefuse;
    return a;
  }
  a.verdict = Verdict::kDefer;
  const double wait = a.estimate.lookahead - opt_.target / std::max(calibration_, 1e-3);
  a.resubmit_at = s.now + std::max(60.0, wait);
  return a;
}

std::string estimate_basis(const StartEstimate& e) {
  auto jobs = [](long n) { return std::to_string(n) + (n == 1 ? " job" : " jobs"); };
  if (e.from_prior > 0) {
    const std::string finished = e.finished_jobs == 0 ? "no job has finished here yet"
                                                      : "only " + jobs(e.finished_jobs) + " finished here so far";
    return "a guess: " + finished + ", too few to learn run times from, so " + jobs(e.from_prior) +
           " ahead without --expected " + (e.from_prior == 1 ? "is" : "are") + " taken to run " +
           format_delay(e.prior) + (e.from_prior == 1 ? "" : " each");
  }
  std::string basis;
  if (e.from_estimates > 0) basis = "the --expected times of " + jobs(e.from_estimates) + " ahead";
  if (e.from_history > 0)
    basis +=
        (basis.empty() ? "" : " and ") + std::string("the run times of ") + jobs(e.finished_jobs) + " finished here";
  return basis.empty() ? "" : "from " + basis;
}

std::string format_delay(double seconds) {
  char buf[64];
  if (!std::isfinite(seconds)) return "unknown (the queue grows faster than it drains)";
  if (seconds < 1) return "now";
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  } else if (seconds < 600) {
    const long s = std::lround(seconds);
    if (s % 60)
      std::snprintf(buf, sizeof buf, "%ld min %ld s", s / 60, s % 60);
    else
      std::snprintf(buf, sizeof buf, "%ld min", s / 60);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%.0f min", std::round(seconds / 60));
  } else {
    const long m = std::lround(seconds / 60);
    if (m % 60)  // whole hours as "1 h", as whole minutes are "2 min"
      std::snprintf(buf, sizeof buf, "%ld h %ld min", m / 60, m % 60);
    else
      std::snprintf(buf, sizeof buf, "%ld h", m / 60);
  }
  return buf;
}

}  // namespace ember::sched
