// Gittins-index scheduling without durations (Tiresias-G): every job, running or waiting, is
// ranked by the Gittins index of its attained service (GPU-seconds: devices x seconds run) under
// the distribution of total service of the jobs that have finished so far, learned online from
// job_finished. A high index means "likely to finish soon for the service it will still take":
// new jobs when most jobs are short, and a job past a mode of the distribution when a cluster of
// finishes lies just ahead of it. Attained service is discretised into geometric bins (`base`
// GPU-seconds, growing by `ratio`) and the index is read at a bin's lower edge, so a job's rank
// changes only when it crosses an edge: those crossings are the policy's wake-ups, which keeps a
// week's simulation at a few thousand decisions more than LAS. The quanta the index maximises over
// end at later edges (or at the job's end), as in Tiresias' discretised form: one finished job
// just above an edge cannot make that edge's index spike. Until `min_history` jobs have
// finished there is no distribution yet and jobs are ranked by bin alone (least attained service
// first). The table is rebuilt after every `refresh` fraction of new finishes. Starvation guard as
// in LAS: a job that has waited `promote` times as long as it has ever run counts its attained
// service afresh from then. Preemptive; within a rank running jobs go first so that equals never
// preempt each other.
#include "scheduler/gittins.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/list_schedule.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"

namespace ember::sched {
namespace {

constexpr size_t kGroups = 4;

struct GittinsOptions {
  double base = 60, ratio = 2;
  int min_history = 16;
  double refresh = 0.05;
  double promote = 8;
  bool by_group = true;
  int window = 0;  // keep the most recent `window` finishes of a group (0: all)
};

// The finished jobs of one group and the index table built from them.
struct Group {
  std::vector<double> samples;
  std::vector<double> index;  // at each bin edge; empty until min_history of them finished
  std::vector<int> beyond;    // at each bin edge, how many of the samples lie above it
  double built = 0;           // samples when the table was built
  double added = 0;           // finishes since
};

class Gittins final : public Policy {
 public:
  explicit Gittins(GittinsOptions o) : o_(o) {
    edges_.push_back(0);
    for (double e = o_.base; e < 1e13; e *= o_.ratio) edges_.push_back(e);
    ends_.assign(edges_.begin() + 1, edges_.end());
    ends_.push_back(kInf);
  }
  std::string name() const override { return "gittins"; }
  PolicyTraits traits() const override {
    return {.clairvoyant = false, .preemptive = true, .work_conserving = true, .learns = true};
  }

  Decision decide(const SchedState& s) override {
    if (s.waiting.empty()) return {};
    if (o_.promote > 0)
      for (const Job* j : s.waiting)
        if (bin_of(*j) > 0 && s.now - j->queued_since >= o_.promote * j->executed - 1e-9) base_[j->id] = j->attained();
    ranked_.clear();
    for (const Job* j : s.waiting) ranked_.push_back({key(*j), 1, j->spec.submit, j});
    for (const Job* j : s.running) ranked_.push_back({key(*j), 0, j->spec.submit, j});
    return list_schedule(s, ranked_, {.preemptive = true});
  }

  double next_wakeup(const SchedState& s) const override {
    double t = kInf;
    if (s.waiting.empty()) return t;  // a rank change matters only when someone waits
    for (const Job* j : s.running) {
      double a = attained(*j);
      auto it = std::upper_bound(edges_.begin(), edges_.end(), a);
      if (it != edges_.end()) t = std::min(t, s.now + (*it - a) / j->spec.gpus);
    }
    if (o_.promote > 0)
      for (const Job* j : s.waiting)
        if (bin_of(*j) > 0) t = std::min(t, std::max(s.now, j->queued_since + o_.promote * j->executed));
    return t;
  }

  void job_finished(const Job& j) override {
    const double service = std::max(0.0, j.executed - j.overhead) * j.spec.gpus;
    for (Group* g : groups_of(j)) {
      if (!g) continue;
      g->samples.push_back(service);
      ++g->added;
      if (o_.window > 0 && static_cast<int>(g->samples.size()) > o_.window) g->samples.erase(g->samples.begin());
      const double n = static_cast<double>(g->samples.size());
      if (n >= o_.min_history && g->added >= std::max(1.0, g->built * o_.refresh)) rebuild(*g);
    }
    ++finished_;
  }

  void forget(JobId id) override {
    base_.erase(id);
    of_job_.erase(id);
  }

  std::map<std::string, double> counters() const override {
    return {{"table_rebuilds", static_cast<double>(rebuilds_)}, {"history_jobs", static_cast<double>(finished_)}};
  }

 private:
  void rebuild(Group& g) {
    ServiceDistribution d(g.samples);
    g.index.resize(edges_.size());
    g.beyond.resize(edges_.size());
    std::vector<double> sorted = g.samples;
    std::sort(sorted.begin(), sorted.end());
    for (size_t b = 0; b < edges_.size(); ++b) {
      g.index[b] = d.index(edges_[b], ends_);
      g.beyond[b] = static_cast<int>(sorted.end() - std::upper_bound(sorted.begin(), sorted.end(), edges_[b]));
    }
    g.built = static_cast<double>(g.samples.size());
    g.added = 0;
    ++rebuilds_;
  }
  // Most specific first: the job's queue and gang size, its queue, its gang size, every job. The
  // jobs of a virtual cluster repeat, so a group's distribution is much narrower than the whole.
  // Without by_group only the last. Resolved once per job (the map's nodes never move).
  const std::array<Group*, kGroups>& groups_of(const Job& j) {
    auto it = of_job_.find(j.id);
    if (it != of_job_.end()) return it->second;
    std::array<Group*, kGroups> g{};
    if (o_.by_group) {
      const std::string n = std::to_string(j.spec.gpus);
      g[0] = &groups_[n + "|" + j.spec.queue];
      g[1] = &groups_["q|" + j.spec.queue];
      g[2] = &groups_[n + "|*"];
    }
    g[3] = &groups_["*"];
    return of_job_.emplace(j.id, g).first->second;
  }
  double attained(const Job& j) const {
    auto it = base_.find(j.id);
    return j.attained() - (it == base_.end() ? 0.0 : it->second);
  }
  size_t bin_of(const Job& j) const {
    return static_cast<size_t>(std::upper_bound(edges_.begin(), edges_.end(), attained(j)) - edges_.begin()) - 1;
  }
  // A group speaks for a job only while it holds enough jobs that ran longer than this one has:
  // one that has outlived its group's history falls back to a coarser group rather than to an
  // index of 0 behind everyone. The whole history has the last word.
  double key(const Job& j) {
    size_t b = bin_of(j);
    const std::array<Group*, kGroups>& gs = groups_of(j);
    for (const Group* g : gs)
      if (g && !g->index.empty() && (g == gs[kGroups - 1] || g->beyond[b] >= o_.min_history)) return -g->index[b];
    return static_cast<double>(b);
  }

  GittinsOptions o_;
  std::vector<double> edges_;  // bin lower edges in GPU-seconds, edges_[0] = 0
  std::vector<double> ends_;   // the quanta's ends: every edge after the first, then +inf
  std::unordered_map<std::string, Group> groups_;
  std::unordered_map<JobId, std::array<Group*, kGroups>> of_job_;
  long rebuilds_ = 0, finished_ = 0;

  std::unordered_map<JobId, double> base_;  // attained service at the latest promotion
  std::vector<Ranked> ranked_;
};

}  // namespace

std::unique_ptr<Policy> make_gittins(const PolicyParams& p) {
  ParamReader r("gittins", p);
  GittinsOptions o;
  o.base = r.number("base", o.base, 1e-3, 1e12);
  o.ratio = r.number("ratio", o.ratio, 1.01, 1e3);
  o.min_history = static_cast<int>(r.number("min_history", o.min_history, 1, 1e9));
  o.refresh = r.number("refresh", o.refresh, 0, 10);
  o.promote = r.number("promote", o.promote, 0, 1e9);
  o.by_group = r.number("by_group", 1, 0, 1) != 0;
  o.window = static_cast<int>(r.number("window", o.window, 0, 1e9));
  r.finish();
  return std::make_unique<Gittins>(o);
}

}  // namespace ember::sched
