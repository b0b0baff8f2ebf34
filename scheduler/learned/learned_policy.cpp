#include "scheduler/learned/learned_policy.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <unordered_map>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/creation.h"
#include "scheduler/list_schedule.h"

namespace ember::sched::learned {

LearnedPolicy::LearnedPolicy(std::shared_ptr<PolicyNet> net, std::string label)
    : net_(std::move(net)), label_(std::move(label)) {}

void LearnedPolicy::explore(uint64_t seed, Episode* episode, double temperature) {
  EMBER_CHECK(temperature > 0, "learned policy: exploration temperature must be > 0, got ", temperature);
  rng_.seed(seed);
  episode_ = episode;
  temperature_ = temperature;
}

std::vector<float> LearnedPolicy::scores(const SchedState& s, std::span<const Job* const> jobs) {
  rows_.clear();
  features_.rows(s, jobs, rows_);
  NoGradGuard guard;
  return net_->forward(from_vector(rows_, {static_cast<int64_t>(jobs.size()), kFeatures})).to_vector<float>();
}

// Higher score first, then Ranked's ties: running ahead of waiting, submission, id.
Ranked LearnedPolicy::rank(const Job& j, double key) {
  return {-key, j.status == JobStatus::kRunning ? 0.0 : 1.0, j.spec.submit, &j};
}

Decision LearnedPolicy::decide(const SchedState& s) {
  DecisionRecord rec;
  rec.time = s.now;
  rec.in_system = static_cast<int>(s.waiting.size() + s.running.size());
  if (s.waiting.empty()) {
    if (episode_) episode_->decisions.push_back(std::move(rec));
    return {};
  }
  if (!episode_) {
    // Deciding: the running jobs are scored only when the waiting ones might not all fit on the
    // free devices (list_schedule_preemptive_batch; otherwise they stay where they are whatever
    // their scores), and in the same forward pass as the waiting ones when they will be needed (a
    // pass costs about as much again in fixed overhead as in rows). The same decision as the full
    // walk below, at a fraction of the rows.
    return list_schedule_preemptive_batch(
        s,
        [&](std::span<const Job* const> waiting, std::span<const Job* const> running, std::vector<Ranked>& out) {
          jobs_.assign(waiting.begin(), waiting.end());
          jobs_.insert(jobs_.end(), running.begin(), running.end());
          if (jobs_.empty()) return;
          const std::vector<float> score = scores(s, jobs_);
          for (size_t i = 0; i < jobs_.size(); ++i) out.push_back(rank(*jobs_[i], score[i]));
        },
        ranked_);
  }
  // Exploring: the jobs in id order, so that each job's Gumbel draw does not depend on the order
  // the driver keeps its running jobs in (the simulator removes them by swapping, and a change
  // there once changed every trained network without changing a single deterministic decision).
  jobs_.assign(s.waiting.begin(), s.waiting.end());
  jobs_.insert(jobs_.end(), s.running.begin(), s.running.end());
  std::sort(jobs_.begin(), jobs_.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  const int64_t n = static_cast<int64_t>(jobs_.size());
  const std::vector<float> score = scores(s, jobs_);
  std::vector<double> key(score.begin(), score.end());
  if (episode_) {  // Gumbel-max: sorting score / T + Gumbel noise draws a Plackett-Luce order
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (double& k : key) k = k / temperature_ - std::log(-std::log(std::max(u(rng_), 1e-300)));
  }
  ranked_.clear();
  for (int64_t i = 0; i < n; ++i) ranked_.push_back(rank(*jobs_[i], key[i]));
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ranked_[a] < ranked_[b]; });
  std::vector<const Job*> sorted(n);
  for (int64_t i = 0; i < n; ++i) sorted[i] = jobs_[order[i]];
  Decision d = list_schedule_sorted(s, sorted, {.preemptive = true});
  if (episode_) {
    // Who holds devices afterwards is decided by the order up to the last of them (and the one
    // after it, which was passed over or not reached): the prefix whose probability is learned.
    std::unordered_map<JobId, int> pos;
    for (int64_t i = 0; i < n; ++i) pos[sorted[i]->id] = static_cast<int>(i);
    int last = -1;
    for (const Job* j : s.running)
      if (std::find(d.preempt.begin(), d.preempt.end(), j->id) == d.preempt.end()) last = std::max(last, pos[j->id]);
    for (const Start& st : d.start) last = std::max(last, pos[st.job]);
    rec.prefix = static_cast<int>(std::min<int64_t>(n, last + 2));
    rec.first_row = episode_->features.size() / kFeatures;
    rec.order = std::move(order);
    episode_->features.insert(episode_->features.end(), rows_.begin(), rows_.end());
    episode_->decisions.push_back(std::move(rec));
  }
  return d;
}

double LearnedPolicy::next_wakeup(const SchedState& s) const {
  return s.waiting.empty() ? kInf : features_.next_change(s);
}

std::unique_ptr<Policy> make_learned(const std::string& path, const std::string& label) {
  return std::make_unique<LearnedPolicy>(
      load_policy_net(path), label.empty() ? "learned:" + std::filesystem::path(path).filename().string() : label);
}

std::optional<std::string> shipped_policy_net() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path net = exe.parent_path().parent_path() / "share" / "ember" / "policy_w41.ckpt";
  if (!fs::is_regular_file(net, ec)) return std::nullopt;
  return net.string();
}

}  // namespace ember::sched::learned
