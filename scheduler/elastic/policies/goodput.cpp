// The elastic goodput policy (docs/scheduler/elastic.md): each round it chooses every job's GPU
// count by greedy marginal value, places the jobs on nodes, and gives each the per-GPU batch of
// highest goodput on its placement (its learning rate scaled by AdaScale's gain, which is what the
// progress model counts). A job's speedup at k GPUs is S(k) = G(k) / G(1) (G: goodput, the best
// over batch sizes, on k GPUs packed on nodes); when k is not what it holds now and it holds some,
// S is scaled by (1 - hyst * restart / age): a restart costs `restart` seconds, amortised over the
// time the job has existed. Its value is w * S^p / p (log S at p = 0): p is the fairness knob (1:
// the sum of speedups, 0: proportional fairness, -1: Pollux's harmonic mean), and
// w = 1 / (1 + attained / las) a least-attained-service weight (las in GPU-hours; Tiresias's
// 16 GPU-hours by default). GPUs go one step at a time to the job whose next step (up to
// `lookahead` GPUs ahead, or straight back to what it holds) adds most value per GPU, until none
// is left or no step adds value. With `explore` > 0 a job grows to at most that many times the
// most GPUs it has held (Pollux's jobs double while their throughput model is fitted); 0, the
// default, plans with the measured model at every size. Rigid jobs take their submitted GPUs and
// batch or nothing.
#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "scheduler/elastic/allocate.h"
#include "scheduler/elastic/policies/policies.h"
#include "scheduler/params.h"

namespace ember::sched::elastic {
namespace {

struct Choice {
  double goodput = 0;
  BatchConfig batch;
};

// The batch of highest goodput for `j` on `shape` (k GPUs): global batches on a geometric grid
// from the smallest allowed to the app's largest, each split into accumulation passes when the
// per-GPU batch exceeds what a GPU holds (and at least two on one GPU above the initial batch,
// which the noise scale needs to be measured).
Choice best_batch(const EJob& j, const Shape& shape, int k) {
  if (j.req.rigid) {
    const BatchConfig c = j.app->rigid_config(k, j.req.batch);
    return {j.goodput(shape, c), c};
  }
  const AppLimits& l = j.app->limits();
  const double lo = std::max<double>(l.init_batch, static_cast<double>(l.min_local) * k), hi = l.max_batch;
  Choice best;
  if (lo > hi) return best;
  constexpr int kPoints = 24;
  for (int i = 0; i < kPoints; ++i) {
    const double b = lo * std::pow(hi / lo, i / static_cast<double>(kPoints - 1));
    const double local = b / k;
    int accum = static_cast<int>(std::ceil(local / l.max_local - 1e-8)) - 1;
    if (k == 1 && b > l.init_batch + 1e-8) accum = std::max(accum, 1);
    int atomic = static_cast<int>(std::ceil(local / (accum + 1) - 1e-8));
    atomic = std::min(atomic, l.max_batch / (k * (accum + 1)));
    const BatchConfig c{atomic, accum};
    if (atomic < l.min_local || atomic > l.max_local || c.global(k) < l.init_batch) continue;
    const double g = j.goodput(shape, c);
    if (g > best.goodput) best = {g, c};
  }
  return best;
}

// k GPUs on as few nodes as possible: full nodes, then the remainder.
Shape packed(int k, int per_node) {
  Shape s(static_cast<size_t>(k / per_node), per_node);
  if (k % per_node) s.push_back(k % per_node);
  return s;
}

class Goodput : public ElasticPolicy {
 public:
  Goodput(double las, double explore, int lookahead, double hyst, double p)
      : las_(las), explore_(explore), lookahead_(lookahead), hyst_(hyst), p_(p) {}
  std::string name() const override { return "goodput"; }
  std::vector<Assignment> decide(const RoundState& s) override;

 private:
  struct Table {
    int epoch = -1;
    std::vector<double> goodput;  // [k]: best goodput on k packed GPUs (0 where none is valid)
  };
  const Table& table(const EJob& j, const SimConfig& c);
  std::vector<int> counts(const RoundState& s);
  std::vector<std::vector<int>> place(const RoundState& s, const std::vector<int>& k) const;

  double las_, explore_;
  int lookahead_;
  double hyst_, p_;
  std::map<int, Table> cache_;  // by job id, refreshed when its epoch changes
};

const Goodput::Table& Goodput::table(const EJob& j, const SimConfig& c) {
  Table& t = cache_[j.id];
  if (t.epoch == j.epoch) return t;
  t.epoch = j.epoch;
  const int total = c.nodes * c.gpus_per_node;
  const AppLimits& l = j.app->limits();
  const int most = j.req.rigid ? j.req.gpus : std::min(total, std::max(1, l.max_batch / l.min_local));
  t.goodput.assign(static_cast<size_t>(most) + 1, 0.0);
  for (int k = j.req.rigid ? most : 1; k <= most; ++k)
    t.goodput[static_cast<size_t>(k)] = best_batch(j, packed(k, c.gpus_per_node), k).goodput;
  return t;
}

std::vector<int> Goodput::counts(const RoundState& s) {
  const SimConfig& c = *s.config;
  std::vector<CountRequest> req(s.active.size());
  for (size_t i = 0; i < req.size(); ++i) {
    const EJob& j = *s.active[i];
    CountRequest& r = req[i];
    r.goodput = table(j, c).goodput;
    const int cap = static_cast<int>(r.goodput.size()) - 1;
    r.most = j.req.rigid || explore_ <= 0 ? cap : std::min(cap, std::max(1, static_cast<int>(explore_ * j.max_gpus)));
    r.rigid = j.req.rigid;
    r.gpus = j.req.gpus;
    r.held = j.gpus();
    r.weight = 1.0 / (1.0 + j.attained / las_);
    const double age = std::max(s.now - j.req.submit, c.interval);
    r.keep = std::max(0.0, 1.0 - hyst_ * c.restart_delay / age);
  }
  return allocate_counts(req, c.nodes * c.gpus_per_node, p_, lookahead_);
}

std::vector<std::vector<int>> Goodput::place(const RoundState& s, const std::vector<int>& k) const {
  const int per = s.config->gpus_per_node;
  std::vector<int> free(static_cast<size_t>(s.config->nodes), per);
  std::vector<std::vector<int>> nodes(k.size());
  std::vector<size_t> moved;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i] > 0 && k[i] == s.active[i]->gpus()) {  // unchanged: stays where it is, no restart
      nodes[i] = s.active[i]->alloc;
      for (int nd : nodes[i]) --free[static_cast<size_t>(nd)];
    } else if (k[i] > 0) {
      moved.push_back(i);
    }
  }
  std::stable_sort(moved.begin(), moved.end(), [&](size_t a, size_t b) { return k[a] > k[b]; });
  for (size_t i : moved) {
    int need = k[i];
    const auto take = [&](size_t nd, int g) {
      nodes[i].insert(nodes[i].end(), static_cast<size_t>(g), static_cast<int>(nd));
      free[nd] -= g;
      need -= g;
    };
    for (size_t nd = 0; nd < free.size() && need >= per; ++nd)  // whole empty nodes first
      if (free[nd] == per) take(nd, per);
    size_t fit = free.size();  // the rest on the fullest node that holds it
    for (size_t nd = 0; nd < free.size(); ++nd)
      if (free[nd] >= need && (fit == free.size() || free[nd] < free[fit])) fit = nd;
    if (need > 0 && fit < free.size()) take(fit, need);
    while (need > 0) {  // else spread over the emptiest nodes
      const size_t nd = static_cast<size_t>(std::max_element(free.begin(), free.end()) - free.begin());
      EMBER_CHECK(free[nd] > 0, "goodput: no free GPU left for ", need, " more (its GPU counts exceed the cluster)");
      take(nd, std::min(need, free[nd]));
    }
  }
  return nodes;
}

std::vector<Assignment> Goodput::decide(const RoundState& s) {
  std::erase_if(cache_, [&](const auto& kv) {
    return std::none_of(s.active.begin(), s.active.end(), [&](const EJob* j) { return j->id == kv.first; });
  });
  const std::vector<int> k = counts(s);
  const std::vector<std::vector<int>> nodes = place(s, k);
  std::vector<Assignment> plan(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    if (nodes[i].empty()) continue;
    EJob probe = *s.active[i];
    probe.alloc = nodes[i];
    plan[i] = {nodes[i], best_batch(probe, probe.shape(), k[i]).batch};
  }
  return plan;
}

}  // namespace

std::unique_ptr<ElasticPolicy> make_goodput(const PolicyParams& params) {
  ParamReader r("goodput", params);
  const double las = r.number("las", 16, 1e-3, 1e9) * 3600;  // GPU-hours
  const double explore = r.number("explore", 0, 0, 64);
  const int lookahead = static_cast<int>(r.number("lookahead", 8, 1, 4096));
  const double hyst = r.number("hyst", 1, 0, 1e6);
  const double p = r.number("p", 0.5, -16, 1);
  r.finish();
  return std::make_unique<Goodput>(las, explore, lookahead, hyst, p);
}

}  // namespace ember::sched::elastic
