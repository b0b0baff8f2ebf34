// The elastic simulator's policies, one line each (a new policy: its file in policies/ and its line
// here); `ember sched simulate --workload` runs them in this order.
#include "core/error.h"
#include "scheduler/elastic/policies/policies.h"
#include "scheduler/elastic/simulator.h"

namespace ember::sched::elastic {

const std::vector<ElasticEntry>& elastic_registry() {
  static const std::vector<ElasticEntry> e = {
      {.name = "tiresias", .make = make_tiresias, .elastic = false},
      {.name = "goodput", .make = make_goodput, .elastic = true},
  };
  return e;
}

std::unique_ptr<ElasticPolicy> make_elastic_policy(const std::string& name, const PolicyParams& params) {
  std::string names;
  for (const ElasticEntry& e : elastic_registry()) {
    if (e.name == name) return e.make(params);
    names += (names.empty() ? "" : ", ") + e.name;
  }
  EMBER_FAIL("unknown policy '", name, "' for a workload of elastic jobs (expected one of ", names, ")");
}

}  // namespace ember::sched::elastic
