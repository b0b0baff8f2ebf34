// Small helpers shared by the scheduler tests: building jobs and traces by hand and running a
// policy over them.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "scheduler/policy.h"
#include "scheduler/sim/simulator.h"

namespace ember::sched::testing {

// A job whose estimate is its true duration unless `estimate` is given (>= 0).
inline JobSpec job(const std::string& name, double submit, int gpus, double duration, double estimate = -2,
                   int priority = 0) {
  JobSpec j;
  j.name = name;
  j.submit = submit;
  j.gpus = gpus;
  j.duration = duration;
  j.estimate = estimate == -2 ? duration : estimate;
  j.priority = priority;
  return j;
}

// Every registered policy and the shipped learned network (`learned`, found beside the test
// program in the build tree): what the tests of every policy run.
inline std::vector<std::string> every_policy() {
  std::vector<std::string> names = policy_names();
  names.push_back("learned");
  return names;
}

inline SimResult run(const std::string& policy, const std::vector<JobSpec>& jobs, int gpus, int node_gpus = 0,
                     double preempt_cost = 0, const PolicyParams& params = {}) {
  auto p = make_policy(policy, params);
  SimOptions o;
  o.preempt_cost = preempt_cost;
  return simulate(jobs, Topology::uniform(gpus, node_gpus), *p, o);
}

inline std::map<std::string, double> jcts(const SimResult& r) {
  std::map<std::string, double> m;
  for (const JobResult& j : r.jobs) m[j.name] = j.jct();
  return m;
}

// The message of the ember::Error that `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// How often `what` occurs in `s`.
inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

inline std::map<std::string, int> preemptions(const SimResult& r) {
  std::map<std::string, int> m;
  for (const JobResult& j : r.jobs) m[j.name] = j.preemptions;
  return m;
}

}  // namespace ember::sched::testing
