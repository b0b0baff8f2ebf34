// Constructors of the built-in policies, for the registry (scheduler/registry.cpp) and for tests
// that want a policy with explicit parameters. Each reads its `name.key` parameters and rejects
// unknown ones.
#pragma once

#include <memory>

#include "scheduler/policy.h"

namespace ember::sched {

std::unique_ptr<Policy> make_fcfs(const PolicyParams& p);
std::unique_ptr<Policy> make_backfill(const PolicyParams& p);
std::unique_ptr<Policy> make_sjf(const PolicyParams& p);
std::unique_ptr<Policy> make_priority(const PolicyParams& p);
std::unique_ptr<Policy> make_las(const PolicyParams& p);
std::unique_ptr<Policy> make_gittins(const PolicyParams& p);
std::unique_ptr<Policy> make_srsf(const PolicyParams& p);
std::unique_ptr<Policy> make_greedy(const PolicyParams& p);
std::unique_ptr<Policy> make_ilp(const PolicyParams& p);
std::unique_ptr<Policy> make_annealing(const PolicyParams& p);
std::unique_ptr<Policy> make_genetic(const PolicyParams& p);
std::unique_ptr<Policy> make_themis(const PolicyParams& p);
std::unique_ptr<Policy> make_gavel(const PolicyParams& p);
std::unique_ptr<Policy> make_gavel_blind(const PolicyParams& p);

}  // namespace ember::sched
