// Linear programs for the scheduler's planning levels (the team shares' static level,
// scheduler/teams.h): a model built row by row and solved by CBC's LP solver (Clp), the solver
// the integer-program policy already uses. Without CBC in the build, solve() is an ember::Error
// that names the missing package.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ember::sched {

class LinearProgram {
 public:
  // A variable in [lo, hi] with objective coefficient `obj`; returns its index.
  int add_var(double lo, double hi, double obj = 0);
  // lo <= sum(coef * x[var]) <= hi (either side may be +-infinity).
  void add_row(std::vector<std::pair<int, double>> terms, double lo, double hi);
  void set_objective(int var, double obj) { obj_.at(var) = obj; }
  int num_vars() const { return static_cast<int>(obj_.size()); }

  struct Solution {
    std::vector<double> x;
    double objective = 0;
  };
  // Maximises the objective. Throws ember::Error naming `what` when the program is infeasible or
  // unbounded, or when the build has no solver.
  Solution maximize(const std::string& what) const;

 private:
  struct Row {
    std::vector<std::pair<int, double>> terms;
    double lo, hi;
  };
  std::vector<double> lo_, hi_, obj_;
  std::vector<Row> rows_;
};

// Whether the build has an LP solver (CBC).
bool have_lp_solver();

}  // namespace ember::sched
