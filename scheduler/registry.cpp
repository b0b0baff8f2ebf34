// Names the built-in policies and duration predictors and builds them; the --compare order runs
// from the simple baselines to the clairvoyant yardstick and the search policies.
#include "core/error.h"
#include "scheduler/learned/learned_policy.h"
#include "scheduler/learned/quantile_predictor.h"
#include "scheduler/policies/policies.h"
#include "scheduler/policy.h"
#include "scheduler/predict.h"

namespace ember::sched {
namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Policy> (*make)(const PolicyParams&);
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"fcfs", make_fcfs},     {"fcfs-backfill", make_backfill},
      {"sjf", make_sjf},       {"priority", make_priority},
      {"las", make_las},       {"gittins", make_gittins},
      {"themis", make_themis}, {"srsf", make_srsf},
      {"greedy", make_greedy},
#ifdef EMBER_HAVE_CBC
      {"ilp", make_ilp},
#endif
      {"sa", make_annealing},  {"ga", make_genetic},
#ifdef EMBER_HAVE_CBC
      {"gavel", make_gavel},   {"gavel-blind", make_gavel_blind},
#endif
  };
  return e;
}

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Entry& e : entries()) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::unique_ptr<Policy> make_policy(const std::string& name, const PolicyParams& params) {
  if (name == "learned" || name.starts_with("learned:")) {
    for (const auto& [k, v] : params)
      EMBER_CHECK(!k.starts_with("learned."), "--set ", k, ": the learned policy has no parameters");
    if (name != "learned") return learned::make_learned(name.substr(8));
    const std::optional<std::string> shipped = learned::shipped_policy_net();
    EMBER_CHECK(shipped,
                "policy learned: the shipped network, share/ember/policy_w41.ckpt beside this program's "
                "folder, is not there (build or install Ember whole); or give a network as learned:FILE");
    return learned::make_learned(*shipped, "learned");
  }
  std::string n = name == "backfill" ? "fcfs-backfill" : name == "tiresias" ? "las" : name;
  for (const Entry& e : entries())
    if (n == e.name) return e.make(params);
#ifndef EMBER_HAVE_CBC
  if (n == "ilp") return make_ilp(params);  // explains the missing solver
#endif
  std::string known;
  for (const std::string& k : policy_names()) known += (known.empty() ? "" : ", ") + k;
  EMBER_FAIL("unknown policy '", name, "': expected one of ", known, ", learned or learned:FILE");
}

std::vector<std::string> predictor_names() {
  return {"history", "quantile"};
}

std::unique_ptr<DurationPredictor> make_predictor(const std::string& name, const PolicyParams& params) {
  if (name == "quantile") return learned::make_quantile_predictor(params);
  EMBER_CHECK(name == "history", "unknown duration predictor '", name, "': expected history or quantile");
  for (const auto& [k, v] : params)
    EMBER_CHECK(!k.starts_with("quantile."), "--set ", k, ": the history predictor has no quantile.* parameters");
  return std::make_unique<HistoryPredictor>(history_options(params));
}

}  // namespace ember::sched
