// Reads a policy's parameters out of the command line's `--set policy.key=value` map, checking
// ranges and refusing keys addressed to the policy that it does not know (a typo in a tuning
// flag must not silently run the defaults).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "scheduler/policy.h"

namespace ember::sched {

class ParamReader {
 public:
  ParamReader(std::string policy, const PolicyParams& params) : policy_(std::move(policy)), params_(params) {}
  double number(const std::string& key, double def, double lo, double hi);
  std::vector<double> numbers(const std::string& key, std::vector<double> def, double lo, double hi);
  // Throws ember::Error naming any `policy.key` that was given but not read.
  void finish() const;

 private:
  const std::string* find(const std::string& key);
  std::string policy_;
  const PolicyParams& params_;
  std::set<std::string> used_;
};

}  // namespace ember::sched
