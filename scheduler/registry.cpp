// Names the built-in policies and duration predictors and builds them (scheduler/registry.h); the
// --compare order runs from the simple baselines to the clairvoyant yardstick and the search policies.
#include "scheduler/registry.h"

#include "core/error.h"
#include "scheduler/learned/learned_policy.h"
#include "scheduler/learned/quantile_predictor.h"
#include "scheduler/policies/policies.h"
#include "scheduler/policy.h"
#include "scheduler/predict.h"

namespace ember::sched {
namespace {

#ifdef EMBER_HAVE_CBC
constexpr bool kHaveCbc = true;
#else
constexpr bool kHaveCbc = false;  // ilp is named only to explain the missing solver
#endif

// One line per policy, in --compare order.
std::vector<PolicyEntry>& entries() {
  static std::vector<PolicyEntry> e = {
      {.name = "fcfs", .make = make_fcfs, .ranking = true, .compare_in_teams = true},
      {.name = "fcfs-backfill", .make = make_backfill, .aliases = {"backfill"}},
      {.name = "sjf", .make = make_sjf, .ranking = true, .compare_predicted = true, .compare_in_teams = true},
      {.name = "priority", .make = make_priority, .ranking = true},
      {.name = "las", .make = make_las, .aliases = {"tiresias"}, .ranking = true, .compare_in_teams = true},
      {.name = "gittins", .make = make_gittins, .ranking = true, .compare_in_teams = true},
      {.name = "themis", .make = make_themis, .ranking = true, .compare_in_teams = true},
      {.name = "srsf", .make = make_srsf, .ranking = true, .compare_predicted = true, .compare_in_teams = true},
      {.name = "greedy", .make = make_greedy},
      {.name = "ilp", .make = make_ilp, .listed = kHaveCbc},
      {.name = "sa", .make = make_annealing},
      {.name = "ga", .make = make_genetic},
#ifdef EMBER_HAVE_CBC
      {.name = "gavel", .make = make_gavel, .typed_only = true},
      {.name = "gavel-blind", .make = make_gavel_blind, .typed_only = true},
#endif
  };
  return e;
}

std::vector<std::string>& listed_names() {
  static std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const PolicyEntry& e : entries())
      if (e.listed) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::unique_ptr<Policy> make_learned_policy(const std::string& name, const PolicyParams& params) {
  for (const auto& [k, v] : params)
    EMBER_CHECK(!k.starts_with("learned."), "--set ", k, ": the learned policy has no parameters");
  if (name != "learned") return learned::make_learned(name.substr(8));
  const std::optional<std::string> shipped = learned::shipped_policy_net();
  EMBER_CHECK(shipped,
              "policy learned: the shipped network, share/ember/policy_w41.ckpt beside this program's "
              "folder, is not there (build or install Ember whole); or give a network as learned:FILE");
  return learned::make_learned(*shipped, "learned");
}

}  // namespace

bool is_learned_policy(const std::string& name) {
  return name == "learned" || name.starts_with("learned:");
}

const std::vector<PolicyEntry>& policy_registry() {
  return entries();
}

const PolicyEntry* find_policy_entry(const std::string& name) {
  for (const PolicyEntry& e : entries()) {
    if (e.name == name) return &e;
    for (const std::string& a : e.aliases)
      if (a == name) return &e;
  }
  return nullptr;
}

void register_policy(PolicyEntry e) {
  EMBER_CHECK(e.make != nullptr, "register_policy: policy '", e.name, "' has no factory");
  EMBER_CHECK(!e.name.empty() && !is_learned_policy(e.name) && !find_policy_entry(e.name),
              "register_policy: the name '", e.name, "' is taken");
  for (const std::string& a : e.aliases)
    EMBER_CHECK(!is_learned_policy(a) && !find_policy_entry(a), "register_policy: the alias '", a, "' is taken");
  std::vector<std::string>& names = listed_names();  // made before the entry joins, which it then adds
  if (e.listed) names.push_back(e.name);
  entries().push_back(std::move(e));
}

const std::vector<std::string>& policy_names() {
  return listed_names();
}

bool known_policy(const std::string& name) {
  return is_learned_policy(name) || find_policy_entry(name) != nullptr;
}

std::vector<std::string> policy_aliases() {
  std::vector<std::string> a;
  for (const PolicyEntry& e : entries()) a.insert(a.end(), e.aliases.begin(), e.aliases.end());
  return a;
}

std::vector<std::string> ranking_policy_names() {
  std::vector<std::string> n;
  for (const PolicyEntry& e : entries())
    if (e.ranking) n.push_back(e.name);
  return n;
}

std::vector<std::string> compare_runs(bool predict_all, bool quotas, bool typed) {
  std::vector<std::string> runs;
  for (const PolicyEntry& e : entries())
    if (e.listed && (typed || !e.typed_only)) runs.push_back(e.name);
  if (learned::shipped_policy_net()) runs.push_back("learned");
  if (!predict_all)
    for (const PolicyEntry& e : entries())
      if (e.listed && e.compare_predicted) runs.push_back(e.name + kPredSuffix);
  if (quotas)
    for (const PolicyEntry& e : entries())
      if (e.listed && e.compare_in_teams) runs.push_back(e.name + kQuotaSuffix);
  return runs;
}

std::unique_ptr<Policy> make_policy(const std::string& name, const PolicyParams& params) {
  if (is_learned_policy(name)) return make_learned_policy(name, params);
  if (const PolicyEntry* e = find_policy_entry(name)) return e->make(params);
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
