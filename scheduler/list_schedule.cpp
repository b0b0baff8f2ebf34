#include "scheduler/list_schedule.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>

#include "core/error.h"

namespace ember::sched {
namespace {

// The order a policy asked for, produced lazily: `pull` appends the next job to `seq`.
class OrderSource {
 public:
  // From ranked jobs in any order: the running ones are sorted (a preemptive walk needs them all
  // in order, as victims), the waiting ones kept in a heap and popped only as far as the walk
  // goes (a long queue is mostly never reached); `pull` merges the two.
  explicit OrderSource(std::vector<Ranked>* ranked) : heap_(ranked) {
    auto running = std::partition(heap_->begin(), heap_->end(),
                                  [](const Ranked& r) { return r.job->status != JobStatus::kRunning; });
    run_.assign(running, heap_->end());
    heap_->erase(running, heap_->end());
    std::sort(run_.begin(), run_.end());
    std::make_heap(heap_->begin(), heap_->end(), std::greater<>());
    for (const Ranked& r : *heap_) waiting_left_ += r.job->status == JobStatus::kWaiting;
  }
  explicit OrderSource(std::span<const Job* const> sorted) : sorted_(sorted), sorted_mode_(true) {
    for (const Job* j : sorted_) waiting_left_ += j->status == JobStatus::kWaiting;
  }

  bool pull() {
    if (!sorted_mode_) {
      if (heap_->empty() && run_next_ == run_.size()) return false;
      if (heap_->empty() || (run_next_ < run_.size() && run_[run_next_] < heap_->front())) {
        pulled(run_[run_next_++].job);
        return true;
      }
      std::pop_heap(heap_->begin(), heap_->end(), std::greater<>());
      pulled(heap_->back().job);
      heap_->pop_back();
      return true;
    }
    while (next_ < sorted_.size()) {
      const Job* j = sorted_[next_++];
      if (max_gpus_ >= 0 && (j->status != JobStatus::kWaiting || j->spec.gpus > max_gpus_)) continue;
      pulled(j);
      orig.push_back(next_ - 1);
      return true;
    }
    return false;
  }

  // Waiting jobs not pulled yet: once none is left, the rest of the order is running jobs that
  // keep their devices, and a walk can stop.
  long waiting_left() const { return waiting_left_; }

  // Every running job still to be pulled, worst ranked first.
  std::vector<const Job*> running_worst_first() const {
    std::vector<const Job*> out;
    if (sorted_mode_) {
      for (size_t k = sorted_.size(); k-- > next_;)
        if (sorted_[k]->status == JobStatus::kRunning) out.push_back(sorted_[k]);
      return out;
    }
    for (size_t k = run_.size(); k-- > run_next_;) out.push_back(run_[k].job);
    return out;
  }

  // From now on pull only waiting jobs of at most `max_gpus` devices.
  void restrict(int max_gpus) {
    max_gpus_ = max_gpus;
    if (sorted_mode_) return;
    std::erase_if(*heap_,
                  [&](const Ranked& r) { return r.job->status != JobStatus::kWaiting || r.job->spec.gpus > max_gpus; });
    std::make_heap(heap_->begin(), heap_->end(), std::greater<>());
    run_next_ = run_.size();
  }

  std::vector<const Job*> seq;
  std::vector<size_t> orig;  // sorted mode: each pulled job's position in the given order

 private:
  void pulled(const Job* j) {
    seq.push_back(j);
    waiting_left_ -= j->status == JobStatus::kWaiting;
  }

  std::vector<Ranked>* heap_ = nullptr;
  std::vector<Ranked> run_;  // heap mode: the running jobs, best first
  size_t run_next_ = 0;
  std::span<const Job* const> sorted_;
  long waiting_left_ = 0;
  bool sorted_mode_ = false;
  size_t next_ = 0;
  int max_gpus_ = -1;
};

// Running jobs that a better-ranked waiting job may displace, worst first. A job leaves the set
// when the walk reaches it (it keeps its devices) or when it is preempted.
class Victims {
 public:
  // `worst_first` must be every running job the walk will pull, in exactly the reverse of the
  // order it pulls them: the k-th running job pulled is then victim n-1-k, no lookup needed.
  Victims(const Topology& t, std::vector<const Job*> worst_first) : topo_(t), jobs_(std::move(worst_first)) {
    alive_.assign(jobs_.size(), 1);
    for (const Job* j : jobs_) alive_gpus_ += j->spec.gpus;
  }

  int alive_gpus() const { return alive_gpus_; }

  // Victims preempted in this walk that it never reached, best ranked first.
  std::vector<const Job*> unpulled_preempted() const {
    std::vector<const Job*> out;
    for (int v = static_cast<int>(jobs_.size()) - 1 - pulled_; v >= 0; --v)
      if (preempted_.count(v)) out.push_back(jobs_[v]);
    return out;
  }

  // The walk reached its next running job: it keeps its devices. False if it was preempted already.
  bool commit_next(const Job* j) {
    int v = static_cast<int>(jobs_.size()) - 1 - pulled_++;
    if (v < 0 || jobs_[v] != j) throw std::logic_error("list_schedule: running jobs pulled out of order");
    if (!alive_[v]) return false;
    drop(v);
    return true;
  }

  // Preempts (into `d`, updating `free`) the cheapest victims that let the gang be placed, and
  // returns its placement; changes nothing when no choice of victims would do. Cheapest: the
  // best job preempted is as badly ranked as possible, then the fewest devices are freed.
  std::optional<Placement> make_room(FreeMap& free, const Job& j, Decision& d, ListStats& stats) {
    const int g = j.spec.gpus;
    const double mem = j.spec.mem_per_gpu;
    const int k = topo_.min_nodes(g, mem);
    if (k < 0 || alive_gpus_ == 0) return std::nullopt;
    if (!indexed_) index_nodes();
    std::vector<int> chosen;
    if (k == 1) {
      if (g > obtainable_) return std::nullopt;
      int best_node = -1, best_rank = 0, best_freed = 0, most = 0;
      for (int n = 0; n < topo_.num_nodes(); ++n) {
        most = std::max(most, free.free(n) + node_alive_[n]);
        if (!topo_.eligible(n, mem) || free.free(n) + node_alive_[n] < g) continue;
        int f = free.free(n), rank = -1;
        for (const auto& [v, c] : on_node(n)) {
          if (f >= g) break;
          if (!alive_[v]) continue;
          f += c;
          rank = v;
        }
        if (f < g || rank < 0) continue;
        if (best_node < 0 || rank < best_rank || (rank == best_rank && f < best_freed))
          best_node = n, best_rank = rank, best_freed = f;
      }
      obtainable_ = most;
      if (best_node < 0) return std::nullopt;
      int f = free.free(best_node);
      std::vector<std::pair<int, int>> picked;  // (victim, devices on the node)
      for (const auto& [v, c] : on_node(best_node)) {
        if (f >= g) break;
        if (!alive_[v]) continue;
        f += c;
        picked.push_back({v, c});
      }
      // Spare the worst-ranked picks that turn out unnecessary once better ones had to go too.
      for (const auto& [v, c] : picked) {
        if (f - c >= g)
          f -= c;
        else
          chosen.push_back(v);
      }
    } else {
      std::vector<std::pair<int, int>> avail;  // (devices obtainable, node)
      for (int n = 0; n < topo_.num_nodes(); ++n)
        if (topo_.eligible(n, mem)) avail.push_back({free.free(n) + node_alive_[n], n});
      if (static_cast<int>(avail.size()) < k) return std::nullopt;
      std::partial_sort(avail.begin(), avail.begin() + k, avail.end(), std::greater<>());
      int total = 0;
      for (int i = 0; i < k; ++i) total += avail[i].first;
      if (total < g) return std::nullopt;
      FreeMap trial = free;
      std::vector<char> taken(jobs_.size(), 0);
      for (int i = 0; i < k && !trial.best_fit(g, mem); ++i)
        for (const auto& [v, c] : on_node(avail[i].second)) {
          if (!alive_[v] || taken[v]) continue;
          taken[v] = 1;
          chosen.push_back(v);
          trial.give(slices(v));
          if (trial.best_fit(g, mem)) break;
        }
      if (!trial.best_fit(g, mem)) return std::nullopt;
    }
    for (int v : chosen) {
      drop(v);
      preempted_.insert(v);
      free.give(slices(v));
      d.preempt.push_back(jobs_[v]->id);
      if (stats.collect) stats.preempted.push_back(jobs_[v]);
    }
    return free.best_fit(g, mem);
  }

 private:
  // Where each victim's devices are; built on the first make_room only, as most walks need none.
  void index_nodes() {
    const int nodes = topo_.num_nodes();
    node_alive_.assign(nodes, 0);
    start_.push_back(0);
    for (size_t v = 0; v < jobs_.size(); ++v) {
      int last = -1;
      for (int d : jobs_[v]->devices) {
        int n = topo_.node_of(d);
        if (n == last) {
          ++flat_.back().count;
        } else {
          flat_.push_back({n, 1});
          last = n;
        }
      }
      start_.push_back(static_cast<int>(flat_.size()));
    }
    // Victims by node in one array (node n's at [node_start_[n], node_start_[n+1])), worst first:
    // one allocation, not one per node, at every decision that needs it.
    node_start_.assign(nodes + 1, 0);
    for (const Slice& sl : flat_) ++node_start_[sl.node + 1];
    for (int n = 0; n < nodes; ++n) node_start_[n + 1] += node_start_[n];
    by_node_.resize(flat_.size());
    std::vector<int> fill(node_start_.begin(), node_start_.end() - 1);
    for (size_t v = 0; v < jobs_.size(); ++v)
      for (int k = start_[v]; k < start_[v + 1]; ++k) {
        const Slice& sl = flat_[k];
        by_node_[fill[sl.node]++] = {static_cast<int>(v), sl.count};
        if (alive_[v]) node_alive_[sl.node] += sl.count;
      }
    indexed_ = true;
  }
  std::span<const std::pair<int, int>> on_node(int n) const {
    return {by_node_.data() + node_start_[n], by_node_.data() + node_start_[n + 1]};
  }
  Placement slices(int v) const { return Placement(flat_.begin() + start_[v], flat_.begin() + start_[v + 1]); }
  void drop(int v) {
    alive_[v] = 0;
    alive_gpus_ -= jobs_[v]->spec.gpus;
    if (indexed_)
      for (int k = start_[v]; k < start_[v + 1]; ++k) node_alive_[flat_[k].node] -= flat_[k].count;
  }

  const Topology& topo_;
  std::vector<const Job*> jobs_;
  int pulled_ = 0;
  std::vector<char> alive_;
  std::set<int> preempted_;
  int alive_gpus_ = 0;
  std::vector<Slice> flat_;  // victim v's devices: flat_[start_[v], start_[v+1])
  std::vector<int> start_;
  std::vector<int> node_alive_;  // devices of live victims on each node
  // The most devices any one node could offer (free + live victims'). Starts, confirmations and
  // preemptions never raise a node's free-plus-victim count during a walk, so a count measured
  // once bounds every later one: a gang bigger than it is refused without a scan.
  int obtainable_ = std::numeric_limits<int>::max();
  bool indexed_ = false;
  std::vector<int> node_start_;
  std::vector<std::pair<int, int>> by_node_;  // (victim, devices on node)
};

// The free devices a decision plans on: the cluster's own until the plan changes them, then a
// private copy. Copying every node's count at every decision was most of what a decision cost on a
// large cluster where the new job simply fits, so a take is only noted until the map is looked at
// again: a decision that starts one job and stops never copies at all.
class PlannedFree {
 public:
  explicit PlannedFree(const FreeMap& cluster) : cluster_(&cluster) {}
  const FreeMap& get() {
    if (!pending_.empty()) edit();
    return copy_ ? *copy_ : *cluster_;
  }
  FreeMap& edit() {
    if (!copy_) copy_.emplace(*cluster_);
    for (const Placement& p : pending_) copy_->take(p);
    pending_.clear();
    taken_ = 0;
    return *copy_;
  }
  void take(const Placement& p) {
    pending_.push_back(p);
    for (const Slice& s : p) taken_ += s.count;
  }
  int total_free() const { return (copy_ ? *copy_ : *cluster_).total_free() - taken_; }

 private:
  const FreeMap* cluster_;
  std::optional<FreeMap> copy_;
  std::vector<Placement> pending_;
  int taken_ = 0;  // devices in pending_
};

// Largest gang that might still be placed: one node's free devices, or for a gang that must span
// nodes anyway, all free devices.
int largest_placeable(const FreeMap& free) {
  int m = free.max_free(), total = free.total_free();
  return total > m && free.topology().min_nodes(total) > 1 ? total : m;
}

// Migrations that clear devices on `nodes` for a gang of `need`: their untouched one-node jobs,
// smallest first, each onto free devices off those nodes by best fit, until `need` devices there
// are free; the first job that finds no room ends the plan. Nothing when they do not reach
// `need` or more than `max_moved` devices would move.
struct MovePlan {
  std::vector<std::pair<const Job*, Placement>> moves;
  int moved = 0;
};

std::optional<MovePlan> plan_moves(const FreeMap& f, std::span<const int> nodes,
                                   const std::vector<std::vector<const Job*>>& on_node, const std::set<JobId>& touched,
                                   int need, double max_moved) {
  std::vector<const Job*> movers;
  for (int n : nodes)
    for (const Job* r : on_node[n])
      if (!touched.count(r->id)) movers.push_back(r);
  std::sort(movers.begin(), movers.end(), [](const Job* a, const Job* b) {
    return a->spec.gpus != b->spec.gpus ? a->spec.gpus < b->spec.gpus : a->id < b->id;
  });
  FreeMap trial = f;
  int got = 0;
  for (int n : nodes) {
    got += f.free(n);
    if (trial.free(n) > 0) trial.take({{n, trial.free(n)}});
  }
  MovePlan plan;
  for (const Job* r : movers) {
    if (got >= need) break;
    auto p = trial.best_fit(r->spec.gpus, r->spec.mem_per_gpu);
    if (!p) break;
    trial.take(*p);
    plan.moves.push_back({r, *p});
    got += r->spec.gpus;
    plan.moved += r->spec.gpus;
  }
  if (got < need || plan.moved > max_moved) return std::nullopt;
  return plan;
}

// Applies a plan's migrations (each preempted and started again in this decision) and starts the
// gang on `gang`, which the moves have freed.
void apply_moves(const MovePlan& plan, const Job& g, const Placement& gang, FreeMap& e, Decision& d,
                 std::set<JobId>& touched) {
  const Topology& topo = e.topology();
  for (const auto& [r, p] : plan.moves) {
    d.preempt.push_back(r->id);
    e.give({{topo.node_of(r->devices.front()), r->spec.gpus}});
    e.take(p);
    d.start.push_back({r->id, p});
    touched.insert(r->id);
  }
  EMBER_CHECK(placement_problem(e, gang, g.spec.gpus, g.spec.mem_per_gpu).empty(), "defragment: the moves for job '",
              g.spec.name, "' did not free its placement");
  e.take(gang);
  d.start.push_back({g.id, gang});
  touched.insert(g.id);
}

// A gang that must span k > 1 nodes and waits although enough devices are free: the k eligible
// nodes with the most free devices (the fewest to move; ties: the lower nodes) are cleared of
// one-node jobs onto the other nodes until they hold the gang; at most `max_share` x its devices
// move, else nothing is done.
void defragment_spanning(const Job& g, int k, const std::vector<std::vector<const Job*>>& on_node,
                         std::set<JobId>& touched, PlannedFree& free, Decision& d, double max_share) {
  const FreeMap& f = free.get();
  const Topology& topo = f.topology();
  const int need = g.spec.gpus;
  std::vector<std::pair<int, int>> by_free;  // (-free, node)
  for (int n = 0; n < topo.num_nodes(); ++n)
    if (topo.eligible(n, g.spec.mem_per_gpu)) by_free.push_back({-f.free(n), n});
  if (static_cast<int>(by_free.size()) < k) return;
  std::partial_sort(by_free.begin(), by_free.begin() + k, by_free.end());
  std::vector<int> chosen;
  int got = 0, room = 0;
  for (int i = 0; i < k; ++i) {
    chosen.push_back(by_free[i].second);
    got += f.free(chosen.back());
    room += topo.node(chosen.back()).gpus;
  }
  if (room < need || need - got > max_share * need) return;
  const std::optional<MovePlan> plan = plan_moves(f, chosen, on_node, touched, need, max_share * need);
  if (!plan) return;
  std::vector<int> freed(topo.num_nodes(), 0);
  for (const auto& [r, p] : plan->moves) freed[topo.node_of(r->devices.front())] += r->spec.gpus;
  Placement gang;
  int left = need;
  for (int n : chosen) {
    const int c = std::min(left, f.free(n) + freed[n]);
    if (c > 0) gang.push_back({n, c});
    left -= c;
  }
  apply_moves(*plan, g, gang, free.edit(), d, touched);
}

// Gangs that wait for want of one node while enough devices are free, scattered over nodes:
// move the running jobs off the node that needs the fewest moved devices, onto free devices
// elsewhere (each move is a migration: preempted and started again in this decision), and start
// the gang there. `max_share`: the most devices moved per gang, as a share of its size.
void defragment(const SchedState& s, const OrderSource& src, const std::vector<size_t>& passed, PlannedFree& free,
                Decision& d, double max_share) {
  const Topology& topo = s.cluster->topology();
  std::set<JobId> touched;
  for (JobId id : d.preempt) touched.insert(id);
  for (const Start& st : d.start) touched.insert(st.job);
  std::vector<std::vector<const Job*>> on_node;
  for (size_t pos : passed) {
    const Job& g = *src.seq[pos];
    if (g.status != JobStatus::kWaiting || touched.count(g.id)) continue;
    const int need = g.spec.gpus, k = topo.min_nodes(need, g.spec.mem_per_gpu);
    if (need < 2 || k < 1) continue;
    if (free.total_free() < need) break;
    if (on_node.empty()) {
      on_node.resize(topo.num_nodes());
      for (const Job* r : s.running) {
        if (r->devices.empty() || touched.count(r->id)) continue;
        const int n = topo.node_of(r->devices.front());
        if (topo.node_of(r->devices.back()) == n) on_node[n].push_back(r);
      }
    }
    if (k > 1) {
      defragment_spanning(g, k, on_node, touched, free, d, max_share);
      continue;
    }
    const FreeMap& f = free.get();
    // Candidate nodes by the fewest devices that must move (need - free), a lower bound on what
    // moves: trying them in that order, the search stops once the bound passes the best found,
    // which is what trying every node would choose (ties: the lower node).
    std::vector<std::pair<int, int>> candidates;
    for (int n = 0; n < topo.num_nodes(); ++n) {
      if (topo.node(n).gpus < need || !topo.eligible(n, g.spec.mem_per_gpu) || f.free(n) >= need) continue;
      int movable = 0;
      for (const Job* r : on_node[n])
        if (!touched.count(r->id)) movable += r->spec.gpus;
      if (f.free(n) + movable >= need && need - f.free(n) <= max_share * need)
        candidates.push_back({need - f.free(n), n});
    }
    std::sort(candidates.begin(), candidates.end());
    int best = -1;
    std::optional<MovePlan> best_plan;
    for (const auto& [bound, n] : candidates) {
      if (best >= 0 && bound > best_plan->moved) break;
      const int node[] = {n};
      std::optional<MovePlan> plan = plan_moves(f, node, on_node, touched, need, max_share * need);
      if (plan && (best < 0 || plan->moved < best_plan->moved || (plan->moved == best_plan->moved && n < best)))
        best = n, best_plan = std::move(plan);
    }
    if (best >= 0) apply_moves(*best_plan, g, {{best, need}}, free.edit(), d, touched);
  }
}

// Where a job starts. On a cluster of device types whose speeds the driver gives, the best fit on
// the types where the job runs fastest, then on those and the next fastest, and so on (a gang
// across types runs at its slowest type's speed, so a wider set never places it faster than the
// narrower one would have); elsewhere the plain best fit. Without it, a job takes whatever
// device frees first, often the slowest kind.
std::optional<Placement> fastest_fit(const SchedState& s, const FreeMap& free, const Job& j) {
  const Topology& t = free.topology();
  if (!s.speed || t.num_types() < 2) return free.best_fit(j.spec.gpus, j.spec.mem_per_gpu);
  std::vector<std::pair<double, int>> speed;  // (speed, type), fastest first
  for (int type = 0; type < t.num_types(); ++type) speed.push_back({(*s.speed)(j.spec, type), type});
  std::stable_sort(speed.begin(), speed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<char> types(static_cast<size_t>(t.num_types()), 0);
  for (size_t i = 0; i < speed.size();) {
    size_t k = i;
    while (k < speed.size() && speed[k].first == speed[i].first) types[static_cast<size_t>(speed[k++].second)] = 1;
    if (k == speed.size()) break;
    if (auto p = free.best_fit(j.spec.gpus, j.spec.mem_per_gpu, &types)) return p;
    i = k;
  }
  return free.best_fit(j.spec.gpus, j.spec.mem_per_gpu);
}

// One run of the list scheduler (run_list): the order, the devices as planned so far and the
// decision being built.
class ListRun {
 public:
  ListRun(const SchedState& s, OrderSource& src, const ListOptions& opt, const std::vector<int>* pref, ListStats* stats)
      : s_(s), src_(src), opt_(opt), pref_(pref), stats_(stats), free_(s.cluster->free()) {
    if (opt.hold && !opt.hold->empty()) free_.take(*opt.hold);
  }

  // Fills free devices from the rest of the order (from seq position `from`), without preempting.
  void fill(size_t from) {
    const bool strict = opt_.strict;
    int cap = largest_placeable(free_.get());
    if (cap <= 0) return;
    if (!strict) src_.restrict(cap);
    for (size_t pos = from; free_.total_free() > 0; ++pos) {
      if (pos >= src_.seq.size() && !src_.pull()) break;
      const Job& j = *src_.seq[pos];
      if (j.status != JobStatus::kWaiting) continue;
      if (cap < 0) cap = largest_placeable(free_.get());  // after a start, when there is a next job
      if (j.spec.gpus > cap) {
        if (strict) break;
        continue;
      }
      if (auto p = place(pos, j)) {
        start(j, std::move(*p));
        cap = -1;
      } else if (strict) {
        break;
      }
    }
  }

  // Walk the order: a running job keeps its devices, a waiting job starts on free devices or on
  // those of worse-ranked running jobs (preempted), until no device is left to hand out.
  void walk_preempting() {
    Victims victims(s_.cluster->topology(), src_.running_worst_first());
    int remaining = free_.total_free() + victims.alive_gpus();
    std::vector<size_t> passed;
    // Past the last waiting job the walk would only confirm running jobs in place (a preempted one
    // it reached would join `passed`, which the unpulled victims below cover in the same order).
    while (remaining > 0 && src_.waiting_left() > 0 && src_.pull()) {
      const size_t pos = src_.seq.size() - 1;
      const Job& j = *src_.seq[pos];
      if (j.status == JobStatus::kRunning) {
        if (victims.commit_next(&j))
          remaining -= j.spec.gpus;
        else
          passed.push_back(pos);  // preempted earlier in this walk: may move to spare devices
        continue;
      }
      if (j.status != JobStatus::kWaiting) continue;
      if (j.spec.gpus > remaining) {
        stats_->skipped_for_budget = true;
        stats_->passed_over.push_back({j.id, remaining});
        passed.push_back(pos);
        continue;
      }
      auto p = place(pos, j);
      if (!p) p = victims.make_room(free_.edit(), j, d_, *stats_);
      if (!p) {
        stats_->unplaced = true;
        stats_->passed_over.push_back({j.id, remaining});
        passed.push_back(pos);
        continue;
      }
      start(j, std::move(*p));
      remaining -= j.spec.gpus;
    }
    offer_spare(passed, victims);
    if (opt_.defrag > 0) defragment(s_, src_, passed, free_, d_, opt_.defrag);
  }

  Decision take() { return std::move(d_); }

 private:
  std::optional<Placement> place(size_t pos, const Job& j) {
    if (pref_) {
      size_t o = src_.orig[pos];
      if (o < pref_->size() && (*pref_)[o] >= 0)
        return free_.get().place_preferring((*pref_)[o], j.spec.gpus, j.spec.mem_per_gpu);
    }
    return fastest_fit(s_, free_.get(), j);
  }

  void start(const Job& j, Placement p) {
    free_.take(p);
    d_.start.push_back({j.id, std::move(p)});
    if (stats_->collect) stats_->started.push_back(&j);
  }

  // A preemption may have freed more than its job needed, or have hit a job that fits elsewhere:
  // offer the spare devices to the jobs passed over and to the preempted (which then migrate),
  // in rank order, so that no device idles while a job that fits waits.
  void offer_spare(const std::vector<size_t>& passed, Victims& victims) {
    for (size_t pos : passed) {
      if (free_.total_free() == 0) break;
      if (auto p = place(pos, *src_.seq[pos])) start(*src_.seq[pos], std::move(*p));
    }
    for (const Job* j : victims.unpulled_preempted()) {
      if (free_.total_free() == 0) break;
      if (auto p = fastest_fit(s_, free_.get(), *j)) start(*j, std::move(*p));
    }
  }

  const SchedState& s_;
  OrderSource& src_;
  const ListOptions& opt_;
  const std::vector<int>* pref_;
  ListStats* stats_;
  PlannedFree free_;
  Decision d_;
};

Decision run_list(const SchedState& s, OrderSource& src, const ListOptions& opt, const std::vector<int>* pref,
                  ListStats* stats) {
  ListStats dummy;
  if (!stats) stats = &dummy;
  if (s.waiting.empty()) return Decision();
  ListRun run(s, src, opt, pref, stats);
  if (opt.preemptive)
    run.walk_preempting();
  else
    run.fill(0);
  return run.take();
}

// When the waiting jobs, taken in rank order, each find a best fit on the free devices left by the
// ones before, the decision that starts them all there; otherwise nothing.
std::optional<Decision> start_all_if_they_fit(const SchedState& s, std::span<const Ranked> waiting_in_order) {
  // Each waiting job in rank order takes its best fit, exactly as the walk would place it.
  Decision d;
  PlannedFree free(s.cluster->free());
  for (const Ranked& r : waiting_in_order) {
    auto p = fastest_fit(s, free.get(), *r.job);
    if (!p) return std::nullopt;
    free.take(*p);
    d.start.push_back({r.job->id, std::move(*p)});
  }
  return d;
}

}  // namespace

Decision list_schedule(const SchedState& s, std::vector<Ranked>& ranked, const ListOptions& opt, ListStats* stats) {
  if (opt.preemptive) {
    // Running jobs ranked before every waiting job keep their devices whatever happens; leaving
    // them out of the heap saves popping most of the cluster at every decision.
    const Ranked* best_waiting = nullptr;
    for (const Ranked& r : ranked)
      if (r.job->status == JobStatus::kWaiting && (!best_waiting || r < *best_waiting)) best_waiting = &r;
    if (best_waiting) {
      Ranked bw = *best_waiting;
      std::erase_if(ranked, [&](const Ranked& r) { return r.job->status == JobStatus::kRunning && r < bw; });
    }
  }
  OrderSource src(&ranked);
  return run_list(s, src, opt, nullptr, stats);
}

Decision list_schedule_sorted(const SchedState& s, std::span<const Job* const> order, const ListOptions& opt,
                              const std::vector<int>* preferred_node, ListStats* stats) {
  OrderSource src(order);
  return run_list(s, src, opt, preferred_node, stats);
}

Decision list_schedule_preemptive_batch(const SchedState& s, const BatchRank& rank, std::vector<Ranked>& scratch,
                                        double defrag, ListStats* stats) {
  if (s.waiting.empty()) return {};
  scratch.clear();
  auto ranked = [&](std::span<const Job* const> waiting, std::span<const Job* const> running) {
    const size_t before = scratch.size();
    rank(waiting, running, scratch);
    EMBER_CHECK(scratch.size() == before + waiting.size() + running.size(), "list_schedule_preemptive: the rank gave ",
                scratch.size() - before, " keys for ", waiting.size() + running.size(), " jobs");
  };
  long want = 0;
  for (const Job* j : s.waiting) want += j->spec.gpus;
  if (want > s.cluster->free().total_free()) {
    ranked(s.waiting, s.running);  // the running jobs will be needed: all in one call
  } else {
    ranked(s.waiting, {});
    std::sort(scratch.begin(), scratch.end());
    if (std::optional<Decision> d = start_all_if_they_fit(s, scratch)) {
      if (stats && stats->collect)
        for (const Ranked& r : scratch) stats->started.push_back(r.job);
      return std::move(*d);
    }
    ranked({}, s.running);
  }
  return list_schedule(s, scratch, {.preemptive = true, .defrag = defrag}, stats);
}

Decision list_schedule_preemptive(const SchedState& s, const std::function<Ranked(const Job&)>& rank,
                                  std::vector<Ranked>& scratch, double defrag, ListStats* stats) {
  return list_schedule_preemptive_batch(
      s,
      [&](std::span<const Job* const> waiting, std::span<const Job* const> running, std::vector<Ranked>& out) {
        for (const Job* j : waiting) out.push_back(rank(*j));
        for (const Job* j : running) out.push_back(rank(*j));
      },
      scratch, defrag, stats);
}

}  // namespace ember::sched
