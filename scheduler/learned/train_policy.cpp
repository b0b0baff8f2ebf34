#include "scheduler/learned/train_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/ops/creation.h"
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#include "scheduler/learned/learned_policy.h"
#include "scheduler/sim/simulator.h"

namespace ember::sched::learned {
namespace {

struct Rollout {
  Episode episode;
  double avg_jct = 0;
  double end = 0;             // the last finish
  std::vector<double> to_go;  // reward-to-go from each decision
};

SimResult run(const std::vector<JobSpec>& w, const Topology& topo, Policy& p, double cost) {
  SimOptions so;
  so.preempt_cost = cost;
  return simulate(w, topo, p, so);
}

double heuristic(const std::vector<JobSpec>& w, const Topology& topo, const std::string& name, double cost) {
  return run(w, topo, *make_policy(name), cost).metrics.avg_jct;
}

// -(integral of jobs in the system from t to the end) / (3600 x jobs), from a rollout's record.
double to_go_at(const Rollout& r, double t, double scale) {
  const auto& d = r.episode.decisions;
  auto it = std::upper_bound(d.begin(), d.end(), t, [](double x, const DecisionRecord& k) { return x < k.time; });
  if (it == d.end()) return -(d.empty() ? 0 : d.back().in_system * std::max(0.0, r.end - t)) * scale;
  const size_t k = static_cast<size_t>(it - d.begin());
  double partial = k == 0 ? 0 : d[k - 1].in_system * (it->time - t);
  return r.to_go[k] - partial * scale;
}

void fill_to_go(Rollout& r, double scale) {
  const auto& d = r.episode.decisions;
  r.to_go.assign(d.size(), 0.0);
  double acc = 0;
  for (size_t k = d.size(); k-- > 0;) {
    const double next = k + 1 < d.size() ? d[k + 1].time : r.end;
    acc -= d[k].in_system * (next - d[k].time) * scale;
    r.to_go[k] = acc;
  }
}

// The policy-gradient term of one decision: its rows' scores in the order drawn, through the
// Plackett-Luce prefix gradient, back into the rows' slots.
void decision_gradient(const DecisionRecord& k, const std::vector<float>& s, double temperature, double weight,
                       std::vector<float>& g) {
  const size_t n = k.order.size();
  std::vector<double> ordered(n), grad(n, 0.0);
  for (size_t p = 0; p < n; ++p) ordered[p] = s[k.first_row + k.order[p]] / temperature;
  plackett_luce_prefix(ordered, k.prefix, weight / temperature, grad);
  for (size_t p = 0; p < n; ++p) g[k.first_row + k.order[p]] += static_cast<float>(grad[p]);
}

// The rollouts of one iteration on window w: each a simulation with the policy exploring (its
// seed drawn from rng in turn), its average JCT, its end and its reward-to-go.
std::vector<Rollout> play_rollouts(const std::vector<JobSpec>& w, const Topology& topo,
                                   const std::shared_ptr<PolicyNet>& net, const TrainPolicyOptions& o, double scale,
                                   std::mt19937_64& rng) {
  std::vector<Rollout> rs(o.rollouts);
  for (Rollout& r : rs) {
    LearnedPolicy p(net);
    p.explore(rng(), &r.episode, o.temperature);
    SimResult sr = run(w, topo, p, o.preempt_cost);
    r.avg_jct = sr.metrics.avg_jct;
    for (const JobResult& j : sr.jobs) r.end = std::max(r.end, j.finish);
    fill_to_go(r, scale);
  }
  return rs;
}

// Per rollout and decision, the advantage (0 where nothing was ordered), with the mean and
// standard deviation over the decisions that count, and their number.
struct Advantages {
  std::vector<std::vector<double>> of;
  double mean = 0, sd = 0, count = 0;
};

// Advantages: each decision's reward-to-go against the other rollouts' from the same moment.
Advantages advantages(const std::vector<Rollout>& rs, double scale) {
  Advantages a;
  std::vector<std::vector<double>>& adv = a.of;
  adv.resize(rs.size());
  double sum = 0, sq = 0, count = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    const auto& d = rs[i].episode.decisions;
    adv[i].assign(d.size(), 0.0);
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k].order.empty()) continue;
      double b = 0;
      for (size_t j = 0; j < rs.size(); ++j)
        if (j != i) b += to_go_at(rs[j], d[k].time, scale);
      adv[i][k] = rs[i].to_go[k] - b / static_cast<double>(rs.size() - 1);
      sum += adv[i][k], sq += adv[i][k] * adv[i][k], count += 1;
    }
  }
  a.mean = count ? sum / count : 0;
  a.sd = count ? std::sqrt(std::max(sq / count - a.mean * a.mean, 0.0)) : 0;
  a.count = count;
  return a;
}

// The policy gradient of every rollout's decisions, weighted by their normalised advantages,
// accumulated into the network's gradients (adv.sd > 0).
void accumulate_policy_gradient(PolicyNet& net, const std::vector<Rollout>& rs, const Advantages& adv,
                                double temperature) {
  for (size_t i = 0; i < rs.size(); ++i) {
    const Episode& ep = rs[i].episode;
    const int64_t rows = static_cast<int64_t>(ep.features.size() / kFeatures);
    if (rows == 0) continue;
    Tensor scores = net.forward(from_vector(ep.features, {rows, kFeatures}));
    const std::vector<float> s = scores.detach().to_vector<float>();
    std::vector<float> g(static_cast<size_t>(rows), 0.0f);
    for (size_t k = 0; k < ep.decisions.size(); ++k)
      if (!ep.decisions[k].order.empty())
        decision_gradient(ep.decisions[k], s, temperature, -(adv.of[i][k] - adv.mean) / adv.sd / adv.count, g);
    scores.backward(from_vector(g, {rows}));
  }
}

// The curve's record of iteration `it` on window w (starting at window_start): its rollouts' mean
// and best average JCT beside the heuristics' on the same window.
CurvePoint training_point(int it, const std::vector<JobSpec>& w, double window_start, const std::vector<Rollout>& rs,
                          const Topology& topo, double preempt_cost) {
  CurvePoint pt;
  pt.iteration = it;
  pt.window_start = window_start;
  pt.rollout_best = INFINITY;
  for (const Rollout& r : rs) {
    pt.rollout_mean += r.avg_jct / static_cast<double>(rs.size());
    pt.rollout_best = std::min(pt.rollout_best, r.avg_jct);
  }
  pt.gittins = heuristic(w, topo, "gittins", preempt_cost);
  pt.las = heuristic(w, topo, "las", preempt_cost);
  return pt;
}

}  // namespace

double plackett_luce_prefix(const std::vector<double>& scores, int prefix, double weight, std::vector<double>& grad) {
  const size_t n = scores.size(), L = static_cast<size_t>(std::clamp<int>(prefix, 0, static_cast<int>(n)));
  EMBER_CHECK(grad.size() == n, "plackett_luce_prefix: ", n, " scores but ", grad.size(), " gradient slots");
  if (n == 0) return 0;
  // P = prod_{p < L} exp(s_p) / Z_p with Z_p = sum_{q >= p} exp(s_q); shifted by the maximum.
  const double m = *std::max_element(scores.begin(), scores.end());
  std::vector<double> e(n), z(n + 1, 0.0);
  for (size_t p = 0; p < n; ++p) e[p] = std::exp(scores[p] - m);
  for (size_t p = n; p-- > 0;) z[p] = z[p + 1] + e[p];
  double logp = 0, cum = 0;
  for (size_t p = 0; p < n; ++p) {
    if (p < L) {
      logp += scores[p] - m - std::log(z[p]);
      cum += 1 / z[p];
    }
    grad[p] += weight * ((p < L ? 1.0 : 0.0) - e[p] * cum);
  }
  return logp;
}

std::vector<JobSpec> cut_window(const std::vector<JobSpec>& trace, size_t first, size_t count) {
  EMBER_CHECK(first + count <= trace.size(), "cut_window: jobs [", first, ", ", first + count, ") of a trace of ",
              trace.size());
  std::vector<JobSpec> w(trace.begin() + first, trace.begin() + first + count);
  const double t0 = w.empty() ? 0 : w.front().submit;
  for (JobSpec& j : w) j.submit -= t0;
  return w;
}

TrainResult train_policy(const std::vector<JobSpec>& trace, const TrainPolicyOptions& o,
                         const std::function<void(const CurvePoint&)>& progress) {
  EMBER_CHECK(o.rollouts >= 2, "train-policy: --rollouts must be >= 2 (the baseline is the other rollouts), got ",
              o.rollouts);
  EMBER_CHECK(o.iterations >= 1 && o.window_jobs >= 2 && o.lr > 0 && o.eval_every >= 1 && o.temperature > 0 &&
                  o.val_windows >= 1,
              "train-policy: iterations, window, eval interval and validation windows must be >= 1, the learning "
              "rate and the temperature > 0");
  size_t train_jobs = 0;
  while (train_jobs < trace.size() && trace[train_jobs].submit < o.train_until) ++train_jobs;
  const size_t W = static_cast<size_t>(o.window_jobs), V = static_cast<size_t>(o.val_windows);
  EMBER_CHECK(train_jobs >= W * (V + 1), "train-policy: the training part (jobs submitted before t=", o.train_until,
              " s) holds ", train_jobs, " jobs; ", V, " validation window(s) of ", W,
              " jobs and one to train on need at least ", W * (V + 1));
  const Topology topo = Topology::uniform(o.gpus, o.node_gpus);
  // The validation windows are the end of the training part; training windows end before them.
  std::vector<std::vector<JobSpec>> val;
  for (size_t k = V; k >= 1; --k) val.push_back(cut_window(trace, train_jobs - k * W, W));
  // Every window holds W jobs, so the mean of their average JCTs is the average over all of them.
  auto on_val = [&](const std::function<double(const std::vector<JobSpec>&)>& avg_jct) {
    double sum = 0;
    for (const std::vector<JobSpec>& w : val) sum += avg_jct(w);
    return sum / static_cast<double>(V);
  };
  const double val_gittins = on_val([&](const auto& w) { return heuristic(w, topo, "gittins", o.preempt_cost); });
  const double val_las = on_val([&](const auto& w) { return heuristic(w, topo, "las", o.preempt_cost); });

  TrainResult res;
  res.net = std::make_shared<PolicyNet>(o.seed);
  optim::Adam adam(res.net->parameters(), {.lr = o.lr});
  std::mt19937_64 rng(o.seed);
  const double scale = 1.0 / (3600.0 * static_cast<double>(W));
  auto evaluate = [&] {
    return on_val([&](const std::vector<JobSpec>& w) {
      LearnedPolicy p(res.net);
      return run(w, topo, p, o.preempt_cost).metrics.avg_jct;
    });
  };
  auto snapshot = [&] {
    nn::StateDict d = res.net->state_dict();
    for (auto& [name, t] : d) t = t.clone();
    return d;
  };
  CurvePoint start;
  start.eval = res.best_eval = evaluate();
  start.eval_gittins = val_gittins;
  start.eval_las = val_las;
  res.curve.push_back(start);
  if (progress) progress(start);
  nn::StateDict best = snapshot();

  for (int it = 1; it <= o.iterations; ++it) {
    const size_t first = std::uniform_int_distribution<size_t>(0, train_jobs - (V + 1) * W)(rng);
    const std::vector<JobSpec> w = cut_window(trace, first, W);
    const std::vector<Rollout> rs = play_rollouts(w, topo, res.net, o, scale, rng);
    const Advantages adv = advantages(rs, scale);
    adam.zero_grad();
    if (adv.sd > 0) {
      accumulate_policy_gradient(*res.net, rs, adv, o.temperature);
      optim::clip_grad_norm_(res.net->parameters(), 1.0);
      adam.step();
    }
    CurvePoint pt = training_point(it, w, trace[first].submit, rs, topo, o.preempt_cost);
    if (it % o.eval_every == 0 || it == o.iterations) {
      pt.eval = evaluate();
      pt.eval_gittins = val_gittins;
      pt.eval_las = val_las;
      if (pt.eval < res.best_eval) {
        res.best_eval = pt.eval;
        res.best_iteration = it;
        best = snapshot();
      }
    }
    res.curve.push_back(pt);
    if (progress) progress(pt);
  }
  res.net->load_state_dict(best);
  return res;
}

std::string curve_csv(const std::vector<CurvePoint>& curve) {
  std::ostringstream o;
  o << "iteration,window_start,rollout_mean_avg_jct,rollout_best_avg_jct,gittins_avg_jct,las_avg_jct,"
       "eval_avg_jct,eval_gittins_avg_jct,eval_las_avg_jct\n";
  char buf[512];
  for (const CurvePoint& p : curve) {
    if (p.iteration == 0)
      std::snprintf(buf, sizeof buf, "0,,,,,,");  // the untrained start: evaluated only
    else
      std::snprintf(buf, sizeof buf, "%d,%.0f,%.3f,%.3f,%.3f,%.3f,", p.iteration, p.window_start, p.rollout_mean,
                    p.rollout_best, p.gittins, p.las);
    o << buf;
    if (p.eval >= 0) {
      std::snprintf(buf, sizeof buf, "%.3f,%.3f,%.3f", p.eval, p.eval_gittins, p.eval_las);
      o << buf;
    } else {
      o << ",,";
    }
    o << "\n";
  }
  return o.str();
}

std::string curve_svg(const std::vector<CurvePoint>& curve, const std::string& title) {
  const double W = 760, H = 420, left = 70, right = 30, top = 40, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  double lo = 1, hi = 1;
  auto rollout = [](const CurvePoint& p) { return p.gittins > 0 ? p.rollout_mean / p.gittins : 1.0; };
  auto eval = [](const CurvePoint& p) { return p.eval >= 0 ? p.eval / p.eval_gittins : 1.0; };
  double last = 1;
  for (const CurvePoint& p : curve) {
    lo = std::min({lo, rollout(p), eval(p)});
    hi = std::max({hi, rollout(p), eval(p)});
    last = std::max(last, static_cast<double>(p.iteration));
  }
  lo = std::floor(lo * 20) / 20, hi = std::ceil(hi * 20) / 20 + 0.05;
  auto X = [&](double i) { return left + i / last * pw; };
  auto Y = [&](double r) { return top + (hi - r) / (hi - lo) * ph; };
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string t;
  for (char c : title) t += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << t << "</text>\n";
  for (double r = lo; r <= hi + 1e-9; r += 0.05)
    o << "<line x1=\"" << left << "\" y1=\"" << Y(r) << "\" x2=\"" << left + pw << "\" y2=\"" << Y(r) << "\" stroke=\""
      << (std::abs(r - 1) < 1e-9 ? "#888" : "#ddd") << "\"/><text x=\"" << left - 6 << "\" y=\"" << Y(r) + 4
      << "\" text-anchor=\"end\">" << r << "</text>\n";
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">iteration</text>\n";
  o << "<text transform=\"translate(18," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">avg JCT / gittins on the same window</text>\n";
  o << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" points=\"";
  for (const CurvePoint& p : curve)
    if (p.gittins > 0) o << X(p.iteration) << "," << Y(rollout(p)) << " ";
  o << "\"/>\n<polyline fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" points=\"";
  for (const CurvePoint& p : curve)
    if (p.eval >= 0) o << X(p.iteration) << "," << Y(eval(p)) << " ";
  o << "\"/>\n<text x=\"" << left + 10 << "\" y=\"" << top + 14
    << "\" fill=\"#1f77b4\">exploring rollouts (training windows)</text>\n<text x=\"" << left + 10 << "\" y=\""
    << top + 30 << "\" fill=\"#d62728\">deterministic policy (validation windows)</text>\n</svg>\n";
  return o.str();
}

}  // namespace ember::sched::learned
