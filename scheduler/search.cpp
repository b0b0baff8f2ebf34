#include "scheduler/search.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "scheduler/params.h"

namespace ember::sched {

double SearchObjective::value(const Job& j) const {
  double r = j.estimated_remaining(now);
  return r == kInf ? 0.0 : 1.0 / std::max(r, 1.0);
}

double SearchObjective::penalty(const Job& j) const {
  double r = j.estimated_remaining(now);
  if (r == kInf || preempt_cost <= 0) return 0.0;
  return value(j) * preempt_cost / (r + preempt_cost);
}

double SearchObjective::projected_remaining(const Job& j, bool preempted) const {
  return std::min(j.estimated_remaining(now), 2 * horizon) + (preempted ? preempt_cost : 0.0);
}

double SearchObjective::score(const SchedState& s, const Decision& d) const {
  std::unordered_map<JobId, const Job*> by_id;
  for (const Job* j : s.waiting) by_id[j->id] = j;
  for (const Job* j : s.running) by_id[j->id] = j;
  double total = 0;
  for (const Start& st : d.start) total += value(*by_id.at(st.job));
  for (JobId id : d.preempt) total -= value(*by_id.at(id)) + penalty(*by_id.at(id));
  return total;
}

namespace {

// A job in the projection of SearchProblem::projected_cost.
struct Projected {
  double left;  // seconds of work still to do
  const Job* job;
  Placement where;
};

// The jobs of the projection of decision d: those running after it, with their placements, and
// those still waiting, shortest work first; `free` is left as d leaves the cluster.
void project_decision(const SearchProblem& p, const Decision& d, FreeMap& free, std::vector<Projected>& run,
                      std::vector<Projected>& wait) {
  const Topology& topo = p.state->cluster->topology();
  auto remaining = [&](const Job& j, bool preempted) { return p.objective.projected_remaining(j, preempted); };
  std::unordered_map<JobId, const Placement*> starts;
  for (const Start& st : d.start) starts[st.job] = &st.placement;
  std::unordered_set<JobId> preempted(d.preempt.begin(), d.preempt.end());
  for (const Job* j : p.state->running)
    if (preempted.count(j->id)) {
      free.give(placement_of(topo, *j));
      if (!starts.count(j->id)) wait.push_back({remaining(*j, true), j, {}});
    } else {
      run.push_back({remaining(*j, false), j, placement_of(topo, *j)});
    }
  for (const Start& st : d.start) {
    const Job& j = p.job(st.job);
    free.take(st.placement);
    run.push_back({remaining(j, preempted.count(j.id) > 0), &j, st.placement});
  }
  for (const Job* j : p.state->waiting)
    if (!starts.count(j->id)) wait.push_back({remaining(*j, false), j, {}});
  auto work = [](const Projected& x) { return x.left * x.job->spec.gpus; };
  std::stable_sort(wait.begin(), wait.end(), [&](const Projected& a, const Projected& b) {
    return work(a) != work(b) ? work(a) < work(b) : a.job->id < b.job->id;
  });
}

// Follows the projection to the horizon H: waiting jobs start by best fit as devices free, and a
// reservation (`reserved`, on the nodes `hold_nodes`) keeps the free devices of its nodes, and those
// their jobs free, for its gang alone until it starts there. Each job's completion time is added
// to `cost` in the order they finish (the sum the search compares, bit for bit), then H for each
// job still running or waiting at the horizon.
double follow_projection(double cost, double H, FreeMap& free, std::vector<Projected>& run,
                         std::vector<Projected>& wait, const Job* reserved, const std::vector<int>* hold_nodes) {
  std::vector<std::pair<int, int>> held;  // (node, devices held there)
  int held_total = 0;
  auto release = [&] {
    for (const auto& [n, c] : held)
      if (c > 0) free.give({{n, c}});
    held.clear();
    held_total = 0;
    reserved = nullptr;
  };
  if (reserved)
    for (int n : *hold_nodes) held.push_back({n, 0});
  auto collect = [&] {
    if (!reserved) return;
    for (auto& [n, c] : held) {
      const int f = free.free(n);
      if (f > 0) free.take({{n, f}});
      c += f;
      held_total += f;
    }
    if (held_total < reserved->spec.gpus) return;
    auto it = std::find_if(wait.begin(), wait.end(), [&](const Projected& w) { return w.job == reserved; });
    if (it != wait.end()) {
      int left = reserved->spec.gpus;
      for (auto& [n, c] : held) {
        const int use = std::min(left, c);
        if (use > 0) it->where.push_back({n, use});
        c -= use;
        left -= use;
      }
      run.push_back(std::move(*it));
      wait.erase(it);
    }
    release();
  };
  double t = 0;
  while (true) {
    collect();
    for (auto it = wait.begin(); it != wait.end() && free.total_free() > 0;) {
      if (auto p = free.best_fit(it->job->spec.gpus, it->job->spec.mem_per_gpu)) {
        free.take(*p);
        if (it->job == reserved) release();  // it fits elsewhere first: the reservation ends
        it->where = std::move(*p);
        run.push_back(std::move(*it));
        it = wait.erase(it);
      } else {
        ++it;
      }
    }
    if (run.empty()) break;
    double dt = kInf;
    for (const Projected& r : run) dt = std::min(dt, r.left);
    if (t + dt >= H) break;
    t += dt;
    for (Projected& r : run) r.left -= dt;
    std::erase_if(run, [&](const Projected& r) {
      if (r.left > 1e-9) return false;
      cost += t;
      free.give(r.where);
      return true;
    });
  }
  return cost + H * static_cast<double>(run.size() + wait.size());
}

}  // namespace

double SearchProblem::projected_cost(const Decision& d, int hold) const {
  const double H = objective.horizon;
  FreeMap free = state->cluster->free();
  std::vector<Projected> run, wait;
  project_decision(*this, d, free, run, wait);
  double cost = 0;
  if (wait.size() > kProjectedWaiting) {
    cost += H * static_cast<double>(wait.size() - kProjectedWaiting);
    wait.resize(kProjectedWaiting);
  }
  // A reservation: the option's nodes' free devices, and those their jobs free, go to `hold_for`
  // alone; once they hold it, it starts there and the rest go back. None for a gang d starts.
  const bool held = hold >= 0 && hold_for && std::none_of(d.start.begin(), d.start.end(), [&](const Start& st) {
                      return st.job == hold_for->id;
                    });
  return follow_projection(cost, H, free, run, wait, held ? hold_for : nullptr,
                           held ? &hold_options[static_cast<size_t>(hold)] : nullptr);
}

double SearchProblem::score(const Candidate& c) const {
  if (objective.horizon > 0) return -projected_cost(decode(c), c.hold);
  ListStats st;
  st.collect = true;
  decode(c, &st);
  double total = 0;
  for (const Job* j : st.started) total += objective.value(*j);
  for (const Job* j : st.preempted) total -= objective.value(*j) + objective.penalty(*j);
  return total;
}

double SearchProblem::score(const Decision& d) const {
  if (objective.horizon > 0) return -projected_cost(d);
  double total = 0;
  for (const Start& st : d.start) total += objective.value(job(st.job));
  for (JobId id : d.preempt) total -= objective.value(job(id)) + objective.penalty(job(id));
  return total;
}

const Job& SearchProblem::job(JobId id) const {
  if (by_id.empty())
    for (const Job* j : order) by_id[j->id] = j;
  return *by_id.at(id);
}

SearchProblem::Candidate SearchProblem::greedy() const {
  Candidate c;
  for (size_t i = fixed; i < window_end; ++i) c.perm.push_back(static_cast<int>(i));
  c.node.assign(window_end, -1);
  return c;
}

Decision SearchProblem::decode(const Candidate& c, ListStats* stats) const {
  std::vector<const Job*>& o = scratch_order;
  o.clear();
  std::vector<int>& pref = scratch_pref;
  pref.assign(window_end, -1);
  for (size_t i = 0; i < fixed; ++i) {
    pref[o.size()] = c.node[i];
    o.push_back(order[i]);
  }
  for (int i : c.perm) {
    pref[o.size()] = c.node[i];
    o.push_back(order[i]);
  }
  o.insert(o.end(), order.begin() + window_end, order.end());
  const Placement held = held_now(c.hold);
  Decision d = list_schedule_sorted(*state, o, {.preemptive = true, .defrag = defrag, .hold = &held}, &pref, stats);
  // A reservation for a gang that fits in the held devices now is a start there, not a wait.
  if (!held.empty() && hold_for && hold_for->status == JobStatus::kWaiting &&
      std::none_of(d.start.begin(), d.start.end(), [&](const Start& st) { return st.job == hold_for->id; })) {
    Placement gang;
    int left = hold_for->spec.gpus;
    for (const Slice& sl : held)
      if (left > 0) gang.push_back({sl.node, std::min(left, sl.count)}), left -= gang.back().count;
    if (left == 0 &&
        placement_problem(state->cluster->free(), gang, hold_for->spec.gpus, hold_for->spec.mem_per_gpu).empty())
      d.start.push_back({hold_for->id, std::move(gang)});
  }
  return d;
}

Placement SearchProblem::held_now(int hold) const {
  Placement held;
  if (hold < 0) return held;
  for (int n : hold_options.at(static_cast<size_t>(hold)))
    if (const int f = state->cluster->free().free(n); f > 0) held.push_back({n, f});
  return held;
}

void SearchProblem::mutate(Candidate& c, std::mt19937_64& rng) const {
  const int nodes = state->cluster->topology().num_nodes();
  bool can_swap = c.perm.size() >= 2, can_move = !movable.empty() && nodes > 1;
  if (hold_for && !hold_options.empty() && (rng() % 5 == 0 || (!can_swap && !can_move))) {
    c.hold = (c.hold >= 0 && rng() % 2 == 0) ? -1 : static_cast<int>(rng() % hold_options.size());
    return;
  }
  if (!can_swap && !can_move) return;
  if (can_swap && (!can_move || rng() % 10 < 6)) {
    size_t a = rng() % c.perm.size(), b = rng() % c.perm.size();
    if (a == b) b = (a + 1) % c.perm.size();
    std::swap(c.perm[a], c.perm[b]);
  } else {
    int pos = movable[rng() % movable.size()];
    c.node[pos] = (rng() % 5 == 0) ? -1 : static_cast<int>(rng() % nodes);
  }
}

namespace {

// The gang the search may weigh reserving devices for (p.hold_for: the first in order of those the
// greedy pass left waiting for want of room, of 2 devices or more) and the node sets it may
// reserve (p.hold_options).
void add_reservation_options(SearchProblem& p, const ListStats& stats) {
  const SchedState& s = *p.state;
  const Topology& t = s.cluster->topology();
  for (const auto& [id, left] : stats.passed_over) {
    auto it = std::find_if(p.order.begin(), p.order.end(), [id = id](const Job* j) { return j->id == id; });
    if (it == p.order.end()) continue;
    const Job& g = **it;
    if (g.spec.gpus >= 2 && t.min_nodes(g.spec.gpus, g.spec.mem_per_gpu) >= 1) {
      p.hold_for = &g;
      break;
    }
  }
  if (p.hold_for) {
    // The nodes that could take part of it, most free devices first: a one-node gang may be
    // held for on each of the first 8 that could take it whole; a gang that spans k nodes on
    // each run of k consecutive ones of that order (up to 8 runs) that could hold it together.
    const int need = p.hold_for->spec.gpus, k = t.min_nodes(need, p.hold_for->spec.mem_per_gpu);
    std::vector<std::pair<int, int>> nodes;
    const FreeMap& f = s.cluster->free();
    for (int n = 0; n < t.num_nodes(); ++n)
      if (t.eligible(n, p.hold_for->spec.mem_per_gpu) && f.free(n) > 0 && (k > 1 || t.node(n).gpus >= need))
        nodes.push_back({-f.free(n), n});
    std::sort(nodes.begin(), nodes.end());
    for (size_t i = 0; i + k <= nodes.size() && p.hold_options.size() < 8; ++i) {
      std::vector<int> option;
      int room = 0;
      for (int m = 0; m < k; ++m) {
        option.push_back(nodes[i + m].second);
        room += t.node(nodes[i + m].second).gpus;
      }
      if (room >= need) p.hold_options.push_back(std::move(option));
    }
  }
}

}  // namespace

Decision SearchPolicy::decide(const SchedState& s) {
  counters_["decisions"] += 1;
  if (s.waiting.empty()) return {};
  SearchObjective obj{s.preempt_cost, s.now};
  SearchObjective lookahead{s.preempt_cost, s.now, opt_.horizon};
  auto rank = [&](const Job& j) -> Ranked {
    if (j.status == JobStatus::kWaiting) return {-obj.value(j) / j.spec.gpus, 1, j.spec.submit, &j};
    return {-(obj.value(j) + obj.penalty(j)) / j.spec.gpus, 0, j.spec.submit, &j};
  };
  if (!searches()) return list_schedule_preemptive(s, rank, ranked_, opt_.defrag);
  ranked_.clear();
  for (const Job* j : s.waiting) ranked_.push_back(rank(*j));
  for (const Job* j : s.running) ranked_.push_back(rank(*j));
  ListStats stats;
  Decision greedy;
  heap_ = ranked_;
  greedy = list_schedule(s, heap_, {.preemptive = true, .defrag = opt_.defrag}, &stats);
  if (!opt_.always) {
    if (!stats.skipped_for_budget && !stats.unplaced) return greedy;
    if (!last_improved_ && stats.passed_over == last_passed_over_ && s.now - last_search_ < opt_.repeat_after)
      return greedy;
    if (s.now - last_search_ < opt_.interval) return greedy;
  }
  last_passed_over_ = stats.passed_over;
  last_search_ = s.now;
  last_improved_ = false;
  counters_["searches"] += 1;
  SearchProblem p;
  p.state = &s;
  p.defrag = opt_.defrag;
  p.objective = lookahead;
  std::sort(ranked_.begin(), ranked_.end());
  const double n = s.cluster->num_devices();
  double cum = 0;
  for (const Ranked& r : ranked_) {
    p.order.push_back(r.job);
    cum += r.job->spec.gpus;
    if (cum <= n - opt_.margin) p.fixed = p.order.size();
    if (p.window_end == 0 && cum >= n + opt_.margin) p.window_end = p.order.size();
  }
  if (p.window_end == 0) p.window_end = p.order.size();
  p.window_end = std::min(p.window_end, p.fixed + static_cast<size_t>(opt_.window));
  const Topology& t = s.cluster->topology();
  for (size_t i = 0; i < p.window_end; ++i) {
    const Job& j = *p.order[i];
    if (j.status == JobStatus::kWaiting && t.min_nodes(j.spec.gpus, j.spec.mem_per_gpu) == 1)
      p.movable.push_back(static_cast<int>(i));
  }
  if (opt_.horizon > 0) add_reservation_options(p, stats);  // weighed only where a projection scores it
  double greedy_score = p.score(greedy);
  std::optional<Decision> better = improve(p, greedy, greedy_score);
  if (better && p.score(*better) > greedy_score + 1e-12 * std::abs(greedy_score)) {
    counters_["improved"] += 1;
    last_improved_ = true;
    return std::move(*better);
  }
  return greedy;
}

SearchPolicy::Options read_search_options(ParamReader& r) {
  SearchPolicy::Options o;
  o.margin = r.number("margin", o.margin, 0, 1e9);
  o.window = static_cast<int>(r.number("window", o.window, 1, 1e6));
  o.always = r.number("always", 0, 0, 1) != 0;
  o.repeat_after = r.number("repeat_after", o.repeat_after, 0, 1e12);
  o.interval = r.number("interval", o.interval, 0, 1e12);
  o.defrag = r.number("defrag", o.defrag, 0, 16);
  o.horizon = r.number("horizon", o.horizon, 0, 1e9);
  return o;
}

}  // namespace ember::sched
