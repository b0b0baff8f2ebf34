#include "scheduler/lp.h"

#include <cmath>

#include "core/error.h"

#ifdef EMBER_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

namespace ember::sched {

int LinearProgram::add_var(double lo, double hi, double obj) {
  EMBER_CHECK(lo <= hi, "LinearProgram: variable bounds [", lo, ", ", hi, "] are empty");
  lo_.push_back(lo), hi_.push_back(hi), obj_.push_back(obj);
  return num_vars() - 1;
}

void LinearProgram::add_row(std::vector<std::pair<int, double>> terms, double lo, double hi) {
  for (const auto& [v, c] : terms)
    EMBER_CHECK(v >= 0 && v < num_vars() && std::isfinite(c), "LinearProgram: row term (", v, ", ", c,
                ") names no variable or has no finite coefficient");
  rows_.push_back({std::move(terms), lo, hi});
}

bool have_lp_solver() {
#ifdef EMBER_HAVE_CBC
  return true;
#else
  return false;
#endif
}

LinearProgram::Solution LinearProgram::maximize(const std::string& what) const {
#ifndef EMBER_HAVE_CBC
  EMBER_FAIL(what,
             ": needs an LP solver, and this build has none (Debian: coinor-libcbc-dev; scripts/setup.sh "
             "installs it)");
#else
  const int n = num_vars(), m = static_cast<int>(rows_.size());
  // Column-major, as CBC takes it.
  std::vector<CoinBigIndex> start(n + 1, 0);
  for (const Row& r : rows_)
    for (const auto& [v, c] : r.terms) ++start[v + 1];
  for (int v = 0; v < n; ++v) start[v + 1] += start[v];
  std::vector<int> index(start[n]);
  std::vector<double> value(start[n]);
  std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
  std::vector<double> row_lo(m), row_hi(m);
  for (int i = 0; i < m; ++i) {
    row_lo[i] = rows_[i].lo, row_hi[i] = rows_[i].hi;
    for (const auto& [v, c] : rows_[i].terms) {
      index[fill[v]] = i;
      value[fill[v]++] = c;
    }
  }
  Cbc_Model* model = Cbc_newModel();
  struct Guard {
    Cbc_Model* m;
    ~Guard() { Cbc_deleteModel(m); }
  } guard{model};
  Cbc_loadProblem(model, n, m, start.data(), index.data(), value.data(), lo_.data(), hi_.data(), obj_.data(),
                  row_lo.data(), row_hi.data());
  Cbc_setObjSense(model, -1);
  Cbc_setLogLevel(model, 0);
  Cbc_solve(model);  // no integer variables: one LP solve
  EMBER_CHECK(!Cbc_isProvenInfeasible(model), what, ": the linear program is infeasible");
  EMBER_CHECK(Cbc_isProvenOptimal(model), what,
              ": the linear program has no optimum (unbounded, or the solver stopped)");
  const double* x = Cbc_getColSolution(model);
  Solution s;
  s.x.assign(x, x + n);
  s.objective = Cbc_getObjValue(model);
  return s;
#endif
}

}  // namespace ember::sched
