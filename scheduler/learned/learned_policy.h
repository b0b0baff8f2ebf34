// The learned policy (`--policy learned:FILE`): every job, running or waiting, is ranked by the
// policy network's score of its features (policy_features.h), higher first, and the preemptive
// list schedule hands out the devices in that order, as for las and gittins. Deciding is
// deterministic. While training (train_policy.h) it explores instead: it perturbs the scores with
// Gumbel noise, which draws the order from the Plackett-Luce distribution of the scores, and
// records every decision (its features, the order drawn, how much of it mattered, the time and
// the jobs in the system) for the policy-gradient step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "scheduler/learned/policy_features.h"
#include "scheduler/learned/policy_net.h"
#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"

namespace ember::sched::learned {

// One call of decide while exploring.
struct DecisionRecord {
  double time = 0;
  int in_system = 0;       // waiting + running jobs: the reward is -in_system x the time until the next
  size_t first_row = 0;    // rows [first_row, first_row + order.size()) of Episode::features
  std::vector<int> order;  // the order drawn: row offsets, best first (empty: nothing was ranked)
  int prefix = 0;          // how many of the first positions decided who holds devices
};

struct Episode {
  std::vector<float> features;  // kFeatures per row
  std::vector<DecisionRecord> decisions;
};

class LearnedPolicy final : public Policy {
 public:
  explicit LearnedPolicy(std::shared_ptr<PolicyNet> net, std::string label = "learned");
  // Explore with Gumbel noise drawn from `seed`, recording into `episode` (owned by the caller,
  // which keeps it for the step after the simulation): orders are drawn from the Plackett-Luce
  // distribution of score / temperature.
  void explore(uint64_t seed, Episode* episode, double temperature);

  std::string name() const override { return label_; }
  PolicyTraits traits() const override {
    return {.clairvoyant = false, .preemptive = true, .work_conserving = true, .learns = true};
  }
  Decision decide(const SchedState& s) override;
  double next_wakeup(const SchedState& s) const override;
  void job_finished(const Job& j) override { features_.observe(j, j.finish); }
  void forget(JobId id) override { features_.forget(id); }
  std::map<std::string, double> counters() const override {
    return {{"history_jobs", static_cast<double>(features_.finished())}};
  }

 private:
  // The network's score of each of `jobs` (features from this decision's state).
  std::vector<float> scores(const SchedState& s, std::span<const Job* const> jobs);
  static Ranked rank(const Job& j, double key);
  std::shared_ptr<PolicyNet> net_;
  std::string label_;
  PolicyFeatures features_;
  Episode* episode_ = nullptr;
  double temperature_ = 1;
  std::mt19937_64 rng_;
  std::vector<const Job*> jobs_;
  std::vector<Ranked> ranked_;
  std::vector<float> rows_;
};

// `learned:FILE` for the registry; `label` names it in results (default: learned:FILE's name).
std::unique_ptr<Policy> make_learned(const std::string& path, const std::string& label = "");

// The network shipped with Ember (scheduler/learned/policy_w41.ckpt, the policy `learned`):
// share/ember/policy_w41.ckpt beside the folder of the running program, where the build tree
// (build/share/ember) and `cmake --install` (PREFIX/share/ember) put it. Empty when it is not
// there, e.g. for a program copied elsewhere on its own.
std::optional<std::string> shipped_policy_net();

}  // namespace ember::sched::learned
