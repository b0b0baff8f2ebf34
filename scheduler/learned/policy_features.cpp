#include "scheduler/learned/policy_features.h"

#include <algorithm>
#include <cmath>

namespace ember::sched::learned {
namespace {

float squash(double x) {
  return static_cast<float>(std::log1p(std::max(0.0, x)) / 10);
}

}  // namespace

PolicyFeatures::PolicyFeatures() : predictor_(HistoryOptions{}) {}

void PolicyFeatures::observe(const Job& j, double now) {
  newest_ = std::max(newest_, now);
  gittins_.add(j);
  predictor_.observe({j.spec.queue, j.spec.gpus, j.spec.submit}, j.work(now), newest_);
  ++observes_;
}

void PolicyFeatures::rows(const SchedState& s, std::span<const Job* const> jobs, std::vector<float>& out) {
  newest_ = std::max(newest_, s.now);
  const double devices = std::max(1, s.cluster->topology().num_devices());
  const float free = static_cast<float>(s.cluster->free().total_free() / devices);
  const float waiting = squash(static_cast<double>(s.waiting.size()));
  auto full_row = [&](const Job& j, double a, const HistoryPredictor::Groups& groups) {
    const double work = j.work(s.now);
    const double total = predictor_.predict_given(groups, {j.spec.queue, j.spec.gpus, j.spec.submit}, newest_, work);
    std::optional<double> index = gittins_.index(j, a);
    return std::array<float, kFeatures>{squash(a),
                                        static_cast<float>(std::log2(j.spec.gpus) / 6),
                                        squash(s.now - j.queued_since),
                                        j.status == JobStatus::kRunning ? 1.0f : 0.0f,
                                        squash(j.preemptions),
                                        squash(total * j.spec.gpus),
                                        index && *index > 0 ? squash(1 / *index) : 2.0f,
                                        squash((total - work) * j.spec.gpus),
                                        free,
                                        waiting};
  };
  for (const Job* j : jobs) {
    const double a = j->attained(s.now);
    Still& c = still_[j->id];
    if (!c.groups[0]) c.groups = predictor_.groups({j->spec.queue, j->spec.gpus, j->spec.submit});
    if (j->status == JobStatus::kRunning) {
      const auto row = full_row(*j, a, c.groups);
      out.insert(out.end(), row.begin(), row.end());
      continue;
    }
    if (c.version != observes_ + 1 || c.attained != a) {
      c.version = observes_ + 1;
      c.attained = a;
      c.row = full_row(*j, a, c.groups);
    }
    c.row[2] = squash(s.now - j->queued_since);
    c.row[8] = free;
    c.row[9] = waiting;
    out.insert(out.end(), c.row.begin(), c.row.end());
  }
}

double PolicyFeatures::next_change(const SchedState& s) const {
  double t = kInf;
  for (const Job* j : s.running) {
    const double a = j->attained(s.now), e = gittins_.next_edge(a);
    if (e < kInf) t = std::min(t, s.now + (e - a) / j->spec.gpus);
  }
  return t;
}

}  // namespace ember::sched::learned
