// The policy registry: each policy's one line, with what the rest of the scheduler needs to know
// of it besides how to build it. The command line (its list of policies, aliases, --compare's
// runs) and the teams (which policies run inside quotas) derive from it, so a new policy is its
// own file plus one line here (scheduler/registry.cpp), or one PolicyRegistration beside it for a
// policy built outside this library (tests/scheduler/registry_test.cpp adds one that way).
// Whether a policy reads durations (clairvoyance) is the policy's own PolicyTraits::clairvoyant.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace ember::sched {

struct PolicyEntry {
  std::string name;
  std::unique_ptr<Policy> (*make)(const PolicyParams&) = nullptr;
  std::vector<std::string> aliases = {};  // other names it is built by (`backfill` for fcfs-backfill)
  // It ranks jobs (a RankingPolicy, scheduler/ranking.h), so it can run inside team quotas (P+quota).
  bool ranking = false;
  // --compare runs it again on predicted durations in place of the true ones (P+pred); it is
  // clairvoyant, and its order is what the prediction replaces.
  bool compare_predicted = false;
  // With --quota, --compare runs it inside the teams too (P+quota).
  bool compare_in_teams = false;
  // --compare runs it only on a cluster of several device types (on one type gavel is max-min
  // time slicing, slow to compare).
  bool typed_only = false;
  // In policy_names() and --compare; false for a policy that is named only to explain why it
  // cannot run (ilp without the CBC solver).
  bool listed = true;
};

// The built-in policies in --compare order (from the simple baselines to the clairvoyant
// yardstick and the search policies), then the ones registered since.
const std::vector<PolicyEntry>& policy_registry();
// The entry a name or an alias names; nullptr for none (and for `learned`, which is no entry).
const PolicyEntry* find_policy_entry(const std::string& name);
// Adds a policy after the others (ember::Error when its name or an alias is taken).
void register_policy(PolicyEntry e);
struct PolicyRegistration {
  explicit PolicyRegistration(PolicyEntry e) { register_policy(std::move(e)); }
};

// Whether make_policy() knows the name: an entry, an alias, `learned` or `learned:FILE`.
bool known_policy(const std::string& name);
// Whether the name is `learned` or `learned:FILE`: a policy whose network make_policy() reads from
// a file, so that its failure can be bad input (a missing or foreign file) rather than a bad name.
bool is_learned_policy(const std::string& name);
// The aliases of every entry, and the ranking policies' names, in registry order.
std::vector<std::string> policy_aliases();
std::vector<std::string> ranking_policy_names();

// The runs of `ember sched simulate --compare`: every listed policy (the typed-only ones on a
// typed cluster; the shipped learned network too where it is installed), then the clairvoyant
// orderings again with predicted durations (unless every run predicts: `predict_all`), then with
// team quotas the ranking policies inside the teams.
std::vector<std::string> compare_runs(bool predict_all, bool quotas, bool typed);
inline constexpr const char* kPredSuffix = "+pred";
inline constexpr const char* kQuotaSuffix = "+quota";

}  // namespace ember::sched
