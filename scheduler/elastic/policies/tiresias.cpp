// Tiresias as Pollux's artifact ran it (docs/scheduler/elastic.md, "Fidelity"): rigid jobs on
// their submitted GPUs and batch, two queues by least attained service. A job starts in the first
// queue and moves to the second once it has run `threshold` GPU-seconds (16 GPU-hours); at each
// round the queues, first then second, each in order, are walked and a job runs when its GPUs fit
// in what the jobs before it left (a job that does not fit is skipped, not waited for); a job that
// no longer runs is preempted. A running job keeps its GPUs; a new one takes them node by node
// from the node with the most free GPUs (the lowest index on a tie). No starvation guard (the
// artifact's is off).
#include <algorithm>
#include <map>

#include "core/error.h"
#include "scheduler/elastic/policies/policies.h"
#include "scheduler/params.h"

namespace ember::sched::elastic {
namespace {

class Tiresias : public ElasticPolicy {
 public:
  explicit Tiresias(double threshold) : threshold_(threshold) {}
  std::string name() const override { return "tiresias"; }
  std::vector<Assignment> decide(const RoundState& s) override;

 private:
  struct State {
    bool running = false;
    double executed = 0;  // seconds run (wall time), what demotion counts
    double last_check = 0;
  };
  void update_queues(const RoundState& s);
  std::vector<int> place(int gpus, std::vector<int>& free) const;

  double threshold_;
  std::vector<int> q0_, q1_;  // job ids
  std::map<int, State> state_;
};

void Tiresias::update_queues(const RoundState& s) {
  std::map<int, const EJob*> active;
  for (const EJob* j : s.active) active[j->id] = j;
  const auto gone = [&](int id) { return !active.count(id); };
  std::erase_if(q0_, gone);
  std::erase_if(q1_, gone);
  std::erase_if(state_, [&](const auto& kv) { return gone(kv.first); });
  for (const EJob* j : s.active)
    if (state_.emplace(j->id, State{}).second) q0_.push_back(j->id);
  for (const EJob* j : s.active) {
    State& st = state_[j->id];
    if (st.running) {
      st.executed += s.now - st.last_check;
      const auto it = std::find(q0_.begin(), q0_.end(), j->id);
      if (it != q0_.end() && st.executed * j->req.gpus >= threshold_) {
        q0_.erase(it);
        q1_.push_back(j->id);
      }
    }
    st.last_check = s.now;
  }
}

std::vector<int> Tiresias::place(int gpus, std::vector<int>& free) const {
  std::vector<int> nodes;
  while (static_cast<int>(nodes.size()) < gpus) {
    const auto most = std::max_element(free.begin(), free.end());  // the first of the largest
    EMBER_CHECK(*most > 0, "tiresias: no free GPU left for a job of ", gpus, " (its GPU count check failed)");
    const int n = static_cast<int>(most - free.begin());
    const int take = std::min(*most, gpus - static_cast<int>(nodes.size()));
    nodes.insert(nodes.end(), static_cast<size_t>(take), n);
    *most -= take;
  }
  return nodes;
}

std::vector<Assignment> Tiresias::decide(const RoundState& s) {
  update_queues(s);
  std::map<int, size_t> index;
  for (size_t i = 0; i < s.active.size(); ++i) index[s.active[i]->id] = i;
  std::vector<Assignment> plan(s.active.size());
  int left = s.config->nodes * s.config->gpus_per_node;
  for (const std::vector<int>* q : {&q0_, &q1_})
    for (int id : *q) {
      const EJob& j = *s.active[index[id]];
      state_[id].running = j.req.gpus <= left;
      if (state_[id].running) left -= j.req.gpus;
    }
  std::vector<int> free(static_cast<size_t>(s.config->nodes), s.config->gpus_per_node);
  for (size_t i = 0; i < s.active.size(); ++i)
    if (state_[s.active[i]->id].running)
      for (int n : s.active[i]->alloc) --free[static_cast<size_t>(n)];
  for (const std::vector<int>* q : {&q0_, &q1_})
    for (int id : *q) {
      const EJob& j = *s.active[index[id]];
      if (!state_[id].running) continue;
      Assignment& a = plan[index[id]];
      a.nodes = j.alloc.empty() ? place(j.req.gpus, free) : j.alloc;
      a.batch = j.app->rigid_config(j.req.gpus, j.req.batch);
    }
  return plan;
}

}  // namespace

std::unique_ptr<ElasticPolicy> make_tiresias(const PolicyParams& params) {
  ParamReader r("tiresias", params);
  const double threshold = r.number("threshold", 16 * 3600.0, 0, 1e12);
  r.finish();
  return std::make_unique<Tiresias>(threshold);
}

}  // namespace ember::sched::elastic
