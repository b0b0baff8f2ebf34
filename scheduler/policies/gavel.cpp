// Heterogeneity-aware allocation in the manner of Gavel (Narayanan et al., OSDI 2020): a policy is
// a linear program over the time shares X[j][t] of each active job j on each device type t
// (sum over t <= 1 per job, sum over jobs of devices x X <= the type's devices), solved at the
// start of every round, and rounded into placements by priority X[j][t] / (the share of its time
// j has had on t so far), so that over rounds each job gets about its shares. Objectives:
// max-min fairness (the default: maximise the smallest normalised throughput, a job's throughput
// sum_t speed[j][t] X[j][t] over what an equal share of every type would give it; spare capacity
// then goes to total throughput) or total throughput. `gavel-blind` solves the same program with
// every speed 1: the heterogeneity-agnostic baseline that does not know an H200 is not a V100.
// Between rounds, free devices go to waiting jobs, best priority first, without preemption.
// A gang wider than every type's devices (a team's small slice of a typed cluster) has no type to
// run on, and in the program it would hold the smallest normalised throughput at 0: it is left out
// of the program and runs across types instead, at its slowest type's speed, first come first
// served ahead of the program's jobs at each round, and is never preempted for them (else it would
// never run, and a simulation holding one would not end).
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/allocation.h"
#include "scheduler/lp.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"

namespace ember::sched {
namespace {

class Gavel final : public Policy {
 public:
  Gavel(bool blind, double round, bool throughput) : blind_(blind), round_(round), throughput_(throughput) {}
  std::string name() const override { return blind_ ? "gavel-blind" : "gavel"; }
  PolicyTraits traits() const override { return {.clairvoyant = false, .preemptive = true, .work_conserving = false}; }

  Decision decide(const SchedState& s) override {
    const Topology& topo = s.cluster->topology();
    const int types = topo.num_types();
    account(s, types);
    if (s.waiting.empty() && s.now < next_round_) return {};
    if (s.now >= next_round_) {
      next_round_ = s.now + round_;
      solve(s, types);
      return round_decision(s, types);
    }
    return fill(s, types);
  }

  double next_wakeup(const SchedState& s) const override {
    return s.waiting.empty() && s.running.empty() ? kInf : std::max(next_round_, s.now + 1e-3);
  }

  void forget(JobId id) override {
    share_.erase(id);
    received_.erase(id);
    arrived_.erase(id);
  }

  std::map<std::string, double> counters() const override {
    return {{"lp_solves", static_cast<double>(solves_)},
            {"lp_max_jobs", static_cast<double>(max_jobs_)},
            {"lp_max_seconds", max_lp_s_}};
  }

 private:
  double speed(const SchedState& s, const Job& j, int t) const {
    return blind_ || !s.speed ? 1.0 : (*s.speed)(j.spec, t);
  }
  int type_of(const Topology& topo, const Job& j) const { return topo.node(topo.node_of(j.devices.front())).type; }

  // Time each running job has had on its type since the last decision.
  void account(const SchedState& s, int types) {
    const double dt = last_ >= 0 ? s.now - last_ : 0;
    last_ = s.now;
    for (const Job* j : s.running) {
      auto& r = received_[j->id];
      r.resize(types, 0);
      r[type_of(s.cluster->topology(), *j)] += dt;
    }
    for (const Job* j : s.waiting) arrived_.emplace(j->id, s.now);
    for (const Job* j : s.running) arrived_.emplace(j->id, s.now);
  }

  // Wider than every type: runs across types, outside the program.
  static bool wide(const Topology& topo, const Job& j) {
    for (int t = 0; t < topo.num_types(); ++t)
      if (topo.devices_of_type(t) >= j.spec.gpus) return false;
    return true;
  }
  // Devices of each type that running wide jobs hold: not the program's to share.
  static std::vector<int> held_by_wide(const SchedState& s, int types) {
    const Topology& topo = s.cluster->topology();
    std::vector<int> held(types, 0);
    for (const Job* j : s.running)
      if (wide(topo, *j))
        for (int d : j->devices) ++held[topo.node(topo.node_of(d)).type];
    return held;
  }

  void solve(const SchedState& s, int types) {
    const auto t0 = std::chrono::steady_clock::now();
    const Topology& topo = s.cluster->topology();
    std::vector<const Job*> active;
    for (auto list : {s.running, s.waiting})
      for (const Job* j : list)
        if (!wide(topo, *j)) active.push_back(j);
    share_.clear();
    if (active.empty()) return;
    AllocationProblem p;
    p.throughput = throughput_;
    const std::vector<int> held = held_by_wide(s, types);
    for (int t = 0; t < types; ++t) p.capacity.push_back(topo.devices_of_type(t) - held[t]);
    for (const Job* j : active) {
      p.gpus.push_back(j->spec.gpus);
      std::vector<double> v;
      for (int t = 0; t < types; ++t) v.push_back(speed(s, *j, t));
      p.speed.push_back(std::move(v));
    }
    Allocation a = solve_allocation(p);
    for (size_t i = 0; i < active.size(); ++i) share_[active[i]->id] = std::move(a.share[i]);
    ++solves_;
    max_jobs_ = std::max<long>(max_jobs_, static_cast<long>(active.size()));
    max_lp_s_ = std::max(max_lp_s_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

  // (priority, job, type) of every job's planned type shares, best first.
  struct Claim {
    double priority;
    const Job* job;
    int type;
  };
  std::vector<Claim> claims(const SchedState& s, std::span<const Job* const> jobs, int types) const {
    std::vector<Claim> c;
    for (const Job* j : jobs) {
      auto it = share_.find(j->id);
      if (it == share_.end()) continue;
      auto r = received_.find(j->id);
      const double since = std::max(round_, s.now - arrived_.at(j->id));
      for (int t = 0; t < types; ++t) {
        const double want = it->second[t];
        if (want < 1e-6) continue;
        const double had = r != received_.end() && t < static_cast<int>(r->second.size()) ? r->second[t] / since : 0;
        c.push_back({want / std::max(had, 1e-3), j, t});
      }
    }
    std::sort(c.begin(), c.end(), [](const Claim& a, const Claim& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.job->spec.submit != b.job->spec.submit) return a.job->spec.submit < b.job->spec.submit;
      return a.job->id < b.job->id;
    });
    return c;
  }

  // Best fit of a gang on nodes of one type (FreeMap::best_fit restricted to it).
  static std::optional<Placement> place_on_type(const FreeMap& free, int type, int gpus) {
    std::vector<char> only(static_cast<size_t>(free.topology().num_types()), 0);
    only[static_cast<size_t>(type)] = 1;
    return free.best_fit(gpus, 0, &only);
  }

  // The round's allocation: by priority, each job gets at most one type while it has room; running
  // jobs that keep their type keep their devices, the others are preempted.
  Decision round_decision(const SchedState& s, int types) {
    const Topology& topo = s.cluster->topology();
    Decision d;
    // The devices as they would be with every program job preempted: waiting wide jobs go there
    // first (they keep what they get), the program's jobs share the rest by type.
    FreeMap free = s.cluster->free();
    for (const Job* j : s.running)
      if (!wide(topo, *j)) free.give(placement_of(topo, *j));
    start_wide(s, free, d);
    std::vector<int> room(types, 0);
    for (int n = 0; n < topo.num_nodes(); ++n) room[topo.node(n).type] += free.free(n);
    std::vector<const Job*> all(s.running.begin(), s.running.end());
    all.insert(all.end(), s.waiting.begin(), s.waiting.end());
    std::unordered_map<JobId, int> chosen;
    for (const Claim& c : claims(s, all, types)) {
      if (chosen.count(c.job->id) || room[c.type] < c.job->spec.gpus) continue;
      chosen[c.job->id] = c.type;
      room[c.type] -= c.job->spec.gpus;
    }
    // Running jobs that keep their type keep their devices, unless a wide job now has them.
    for (const Job* j : s.running) {
      if (wide(topo, *j)) continue;
      auto it = chosen.find(j->id);
      const Placement here = placement_of(topo, *j);
      if (it != chosen.end() && it->second == type_of(topo, *j) && fits(free, here)) {
        free.take(here);
        chosen.erase(it);
        continue;
      }
      d.preempt.push_back(j->id);
    }
    for (const Claim& c : claims(s, s.waiting, types)) {
      auto it = chosen.find(c.job->id);
      if (it == chosen.end() || it->second != c.type) continue;
      std::optional<Placement> p = place_on_type(free, c.type, c.job->spec.gpus);
      if (!p) continue;
      free.take(*p);
      d.start.push_back({c.job->id, *p});
      chosen.erase(it);
    }
    // Preempted jobs chosen for a type (another one, or theirs where a wide job took their
    // devices) move there now.
    for (const Job* j : s.running) {
      auto it = chosen.find(j->id);
      if (it == chosen.end()) continue;
      std::optional<Placement> p = place_on_type(free, it->second, j->spec.gpus);
      if (!p) continue;
      free.take(*p);
      d.start.push_back({j->id, *p});
    }
    return d;
  }

  static bool fits(const FreeMap& free, const Placement& p) {
    for (const Slice& sl : p)
      if (free.free(sl.node) < sl.count) return false;
    return true;
  }

  // Waiting wide jobs, first come first served (the waiting list is in submission order), onto
  // `free` across types while they fit.
  static void start_wide(const SchedState& s, FreeMap& free, Decision& d) {
    const Topology& topo = s.cluster->topology();
    for (const Job* j : s.waiting) {
      if (!wide(topo, *j)) continue;
      std::optional<Placement> p = free.best_fit(j->spec.gpus, j->spec.mem_per_gpu);
      if (!p) break;  // the first in line waits for room; later ones do not pass it
      free.take(*p);
      d.start.push_back({j->id, *p});
    }
  }

  // Between rounds: waiting jobs onto free devices, best claim first, no preemption.
  Decision fill(const SchedState& s, int types) {
    Decision d;
    FreeMap free = s.cluster->free();
    if (free.total_free() == 0) return d;
    start_wide(s, free, d);
    std::unordered_map<JobId, char> started;
    for (const Claim& c : claims(s, s.waiting, types)) {
      if (started.count(c.job->id) || free.total_free() < c.job->spec.gpus) continue;
      std::optional<Placement> p = place_on_type(free, c.type, c.job->spec.gpus);
      if (!p) continue;
      free.take(*p);
      d.start.push_back({c.job->id, *p});
      started[c.job->id] = 1;
    }
    // Jobs that arrived since the round have no shares yet: the fastest type with room for them.
    for (const Job* j : s.waiting) {
      if (share_.count(j->id) || free.total_free() < j->spec.gpus || wide(s.cluster->topology(), *j)) continue;
      int best = -1;
      std::optional<Placement> bp;
      for (int t = 0; t < types; ++t) {
        if (best >= 0 && speed(s, *j, t) <= speed(s, *j, best)) continue;
        if (auto p = place_on_type(free, t, j->spec.gpus)) best = t, bp = p;
      }
      if (!bp) continue;
      free.take(*bp);
      d.start.push_back({j->id, *bp});
    }
    return d;
  }

  bool blind_;
  double round_;
  bool throughput_;
  double next_round_ = -kInf, last_ = -1;
  std::unordered_map<JobId, std::vector<double>> share_, received_;
  std::unordered_map<JobId, double> arrived_;
  long solves_ = 0, max_jobs_ = 0;
  double max_lp_s_ = 0;
};

std::unique_ptr<Policy> make(const std::string& name, const PolicyParams& p, bool blind) {
  ParamReader r(name, p);
  const double round = r.number("round", 360, 1, 1e9);
  const double throughput = r.number("throughput", 0, 0, 1);
  r.finish();
  if (!have_lp_solver())
    EMBER_FAIL("policy '", name, "' needs an LP solver: this build has none (Debian: coinor-libcbc-dev)");
  return std::make_unique<Gavel>(blind, round, throughput != 0);
}

}  // namespace

std::unique_ptr<Policy> make_gavel(const PolicyParams& p) {
  return make("gavel", p, false);
}
std::unique_ptr<Policy> make_gavel_blind(const PolicyParams& p) {
  return make("gavel-blind", p, true);
}

}  // namespace ember::sched
