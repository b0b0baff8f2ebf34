// FCFS with EASY backfilling: jobs start in submission order; when the head does not fit, it gets
// a reservation at the earliest time the running jobs' estimates free enough devices (the shadow
// time), and a later job may jump ahead only if it fits now and either ends, by its estimate,
// before the shadow time or uses only devices the head will not need then. Without estimates a
// job can only use those spare devices, so the policy degrades to a conservative backfill that
// never delays the head. Reservations count devices, not nodes: fragmentation can still delay
// the head a little.
#include <algorithm>
#include <functional>

#include "scheduler/list_schedule.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"

namespace ember::sched {
namespace {

class Backfill final : public Policy {
 public:
  std::string name() const override { return "fcfs-backfill"; }
  PolicyTraits traits() const override { return {.clairvoyant = true, .preemptive = false, .work_conserving = false}; }

  Decision decide(const SchedState& s) override {
    Decision d;
    FreeMap free = s.cluster->free();
    size_t i = 0;
    for (; i < s.waiting.size(); ++i) {
      const Job& j = *s.waiting[i];
      auto p = free.best_fit(j.spec.gpus, j.spec.mem_per_gpu);
      if (!p) break;
      free.take(*p);
      d.start.push_back({j.id, std::move(*p)});
    }
    if (i >= s.waiting.size() || free.total_free() == 0) return d;

    const Job& head = *s.waiting[i];
    std::vector<std::pair<double, int>> ends;  // (estimated end, devices freed)
    for (const Job* r : s.running) ends.push_back({s.now + r->estimated_remaining(s.now), r->spec.gpus});
    for (size_t k = 0; k < i; ++k)  // the ones just started
      ends.push_back({s.now + s.waiting[k]->estimated_remaining(s.now), s.waiting[k]->spec.gpus});
    // Ends in time order only as far as the head needs: a heap popped until it fits, not a sort
    // of every running job (on a congested cluster most decisions come here).
    std::make_heap(ends.begin(), ends.end(), std::greater<>());
    double shadow = kInf;
    int avail = free.total_free(), extra = 0;
    while (!ends.empty()) {
      std::pop_heap(ends.begin(), ends.end(), std::greater<>());
      const auto [end, g] = ends.back();
      ends.pop_back();
      if (end == kInf) break;
      avail += g;
      if (avail >= head.spec.gpus) {
        shadow = end;
        extra = avail - head.spec.gpus;
        break;
      }
    }
    for (++i; i < s.waiting.size() && free.total_free() > 0; ++i) {
      const Job& j = *s.waiting[i];
      double end = s.now + j.estimated_remaining(s.now);
      bool before_shadow = end <= shadow && end < kInf;
      if (!before_shadow && j.spec.gpus > extra) continue;
      auto p = free.best_fit(j.spec.gpus, j.spec.mem_per_gpu);
      if (!p) continue;
      if (!before_shadow) extra -= j.spec.gpus;
      free.take(*p);
      d.start.push_back({j.id, std::move(*p)});
    }
    return d;
  }
};

}  // namespace

std::unique_ptr<Policy> make_backfill(const PolicyParams& p) {
  ParamReader("fcfs-backfill", p).finish();
  return std::make_unique<Backfill>();
}

}  // namespace ember::sched
