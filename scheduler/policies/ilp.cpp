// Integer program for placing a batch (scheduler/search.h's objective, solved exactly by CBC on
// the top of the greedy order: every job ranked before the point where the devices run out,
// plus `margin` devices' worth after it).
//
// Variables: keep_k for each running job of the batch (1: stays where it is, 0: preempted);
// for each waiting gang of one device, z_j; for each waiting gang that fits one node, x_jn
// (starts on node n); for each wider gang, z_j with integer devices u_jn and node-use flags w_jn.
// Each node's devices bound what kept and started gangs use there; one-device jobs go anywhere,
// so a single cluster-wide count bounds them (exact: any leftover device can take one). The
// greedy answer is the solver's starting incumbent, and its decision is taken only when it scores
// strictly better on the same objective; anything the program left idle is then filled in greedy
// order, which can only add value.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/search.h"

#ifdef EMBER_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

namespace ember::sched {
namespace {

#ifdef EMBER_HAVE_CBC

// Later start times the look-ahead program offers (a geometric grid up to half the horizon).
constexpr int kGridPoints = 7;

struct Row {
  std::vector<int> cols;
  std::vector<double> coefs;
  void add(int c, double v) { cols.push_back(c), coefs.push_back(v); }
};

class Ilp final : public SearchPolicy {
 public:
  Ilp(Options o, double time_limit, int max_jobs, double gap, int max_nodes, int log, bool full_cbc)
      : SearchPolicy(o),
        time_limit_(time_limit),
        max_jobs_(max_jobs),
        margin_(o.margin),
        gap_(gap),
        max_nodes_(max_nodes),
        log_(log),
        full_cbc_(full_cbc) {}
  std::string name() const override { return "ilp"; }

 protected:
  std::optional<Decision> improve(const SearchProblem& p, const Decision& greedy, double greedy_score) override {
    const SchedState& s = *p.state;
    const Topology& t = s.cluster->topology();
    const int nodes = t.num_nodes();
    // The batch.
    size_t q_end = 0;
    double cum = 0;
    while (q_end < p.order.size() && cum < s.cluster->num_devices() + margin_ && static_cast<int>(q_end) < max_jobs_)
      cum += p.order[q_end++]->spec.gpus;

    // What greedy did: the incumbent, and the commitments above the contested window.
    std::unordered_map<JobId, const Placement*> started;
    for (const Start& st : greedy.start) started[st.job] = &st.placement;
    std::vector<JobId> pre(greedy.preempt.begin(), greedy.preempt.end());
    std::sort(pre.begin(), pre.end());
    // Jobs ranked above the contested window that greedy kept or started stay in (the program
    // still chooses where the started ones go): the search is over the contested jobs, as for sa
    // and ga, and the branch and bound stays small.
    auto committed = [&](size_t i) {
      if (i >= p.fixed) return false;
      const Job& j = *p.order[i];
      return j.status == JobStatus::kRunning ? !std::binary_search(pre.begin(), pre.end(), j.id)
                                             : started.count(j.id) > 0;
    };

    // Capacity: the free devices plus those of the running jobs the program may preempt. A
    // committed running job keeps its devices whatever the program does, so it gets no column
    // at all (most of a large cluster's running jobs: leaving them out keeps the program small).
    std::vector<int> cap(nodes);
    for (int n = 0; n < nodes; ++n) cap[n] = s.cluster->free().free(n);
    std::vector<Placement> held(q_end);
    for (size_t i = 0; i < q_end; ++i)
      if (p.order[i]->status == JobStatus::kRunning && !committed(i)) {
        held[i] = placement_of(t, *p.order[i]);
        for (const Slice& sl : held[i]) cap[sl.node] += sl.count;
      }
    int total_cap = 0;
    for (int c : cap) total_cap += c;
    double vmax = 0;
    for (size_t i = 0; i < q_end; ++i)
      if (!committed(i)) vmax = std::max(vmax, p.objective.value(*p.order[i]) + p.objective.penalty(*p.order[i]));
    if (vmax <= 0) return std::nullopt;
    const double scale = 1000.0 / vmax;
    // With a look-ahead the program optimises the projection's objective (search.h): each job's
    // min(completion, horizon), here as the seconds of the horizon it saves, horizon - min(start +
    // remaining, horizon), for starting now or at one of the later times of `grid`, with the
    // devices counted at each of those times (no arrivals and no preemption after this decision,
    // as in the projection; a preempted job restarts later with the preemption cost added).
    const double H = p.objective.horizon;
    const bool look = H > 0;
    const double hscale = look ? 1000.0 / H : 0.0;
    auto remaining = [&](const Job& j, bool preempted) { return p.objective.projected_remaining(j, preempted); };
    auto saved = [&](double start, double r) { return (H - std::min(start + r, H)) * hscale; };
    std::vector<double> grid;  // later start times: H/128, H/64, ..., H/2
    if (look)
      for (int k = kGridPoints; k >= 1; --k) grid.push_back(H / std::pow(2.0, k));

    Cbc_Model* m = Cbc_newModel();
    struct Guard {
      Cbc_Model* m;
      ~Guard() { Cbc_deleteModel(m); }
    } guard{m};
    // Columns and rows are collected first and handed to CBC in one call: adding them one at a
    // time regrows CBC's packed matrix at every call, which cost more than the solve itself.
    std::vector<double> col_lb, col_ub, col_obj;
    std::vector<char> col_int;
    auto add_col = [&](double ub, double obj, bool integer, double lb = 0.0) {
      col_lb.push_back(lb), col_ub.push_back(ub), col_obj.push_back(obj), col_int.push_back(integer ? 1 : 0);
      return static_cast<int>(col_lb.size()) - 1;
    };
    std::vector<Row> node_rows(nodes);
    Row global;
    std::vector<Row> extra_rows;
    std::vector<char> extra_sense;
    std::vector<double> extra_rhs;
    // Per batch job: its columns.
    struct Cols {
      int keep = -1, z = -1;
      std::vector<std::pair<int, int>> x, u, w;  // (node, column)
    };
    std::vector<Cols> cols(q_end);
    for (size_t i = 0; i < q_end; ++i) {
      const Job& j = *p.order[i];
      const int g = j.spec.gpus;
      const bool running = j.status == JobStatus::kRunning;
      const double v = committed(i) ? 0.0 : look ? saved(0, remaining(j, false)) : p.objective.value(j) * scale;
      if (running) {
        // A committed job's value is a constant: leaving it out of the objective keeps the
        // relative gap about the contested jobs, whose values are a sliver of the total.
        if (committed(i)) continue;  // its devices are not in `cap`
        cols[i].keep = add_col(1, look ? v : v + p.objective.penalty(j) * scale, true);
        for (const Slice& sl : held[i]) node_rows[sl.node].add(cols[i].keep, sl.count);
        global.add(cols[i].keep, g);
        continue;
      }
      const double mem = j.spec.mem_per_gpu;
      const int k = t.min_nodes(g, mem);
      bool anywhere = g == 1;
      for (int n = 0; n < nodes && anywhere; ++n) anywhere = t.eligible(n, mem);
      if (k < 0) continue;
      if (anywhere) {
        cols[i].z = add_col(1, v, true, committed(i) ? 1 : 0);
        global.add(cols[i].z, 1);
      } else if (k == 1) {
        Row one;
        for (int n = 0; n < nodes; ++n) {
          if (!t.eligible(n, mem) || cap[n] < g) continue;
          int c = add_col(1, v, true);
          cols[i].x.push_back({n, c});
          node_rows[n].add(c, g);
          global.add(c, g);
          one.add(c, 1);
        }
        if (!one.cols.empty())
          extra_rows.push_back(one), extra_sense.push_back(committed(i) ? 'E' : 'L'), extra_rhs.push_back(1);
      } else {
        cols[i].z = add_col(1, v, true, committed(i) ? 1 : 0);
        Row sum, span;
        sum.add(cols[i].z, -g);
        span.add(cols[i].z, -k);
        for (int n = 0; n < nodes; ++n) {
          if (!t.eligible(n, mem) || cap[n] == 0) continue;
          int ub = std::min(cap[n], g);
          int uc = add_col(ub, 0, true), wc = add_col(1, 0, true);
          cols[i].u.push_back({n, uc});
          cols[i].w.push_back({n, wc});
          node_rows[n].add(uc, 1);
          global.add(uc, 1);
          sum.add(uc, 1);
          span.add(wc, 1);
          Row link;
          link.add(uc, 1);
          link.add(wc, -ub);
          extra_rows.push_back(link), extra_sense.push_back('L'), extra_rhs.push_back(0);
        }
        extra_rows.push_back(sum), extra_sense.push_back('E'), extra_rhs.push_back(0);
        extra_rows.push_back(span), extra_sense.push_back('L'), extra_rhs.push_back(0);
      }
    }
    if (look) {
      // Each contested job may instead start at a later time of the grid (a running one restarts
      // there, preemption cost added); at most one start per job.
      std::vector<std::vector<int>> later(q_end);
      for (size_t i = 0; i < q_end; ++i) {
        const Job& j = *p.order[i];
        const bool running = j.status == JobStatus::kRunning;
        if (committed(i) || (cols[i].keep < 0 && cols[i].z < 0 && cols[i].x.empty())) continue;
        Row once;
        for (const auto& [n, c] : cols[i].x) once.add(c, 1);
        if (cols[i].keep >= 0) once.add(cols[i].keep, 1);
        if (cols[i].z >= 0) once.add(cols[i].z, 1);
        for (double t0 : grid) {
          const int c = add_col(1, saved(t0, remaining(j, running)), true);
          later[i].push_back(c);
          once.add(c, 1);
        }
        extra_rows.push_back(once), extra_sense.push_back('L'), extra_rhs.push_back(1);
      }
      // The devices in use at each grid time: the running jobs the program cannot touch (a
      // constant), the jobs it keeps or starts now that are still running then, and the later
      // starts whose run covers it.
      const int devices = s.cluster->num_devices();
      std::unordered_set<JobId> in_program;
      for (size_t i = 0; i < q_end; ++i)
        if (cols[i].keep >= 0) in_program.insert(p.order[i]->id);
      for (size_t k = 0; k < grid.size(); ++k) {
        const double at = grid[k];
        double fixed_use = 0;
        for (const Job* j : s.running)
          if (!in_program.count(j->id) && remaining(*j, false) > at) fixed_use += j->spec.gpus;
        Row use;
        for (size_t i = 0; i < q_end; ++i) {
          const Job& j = *p.order[i];
          const int g = j.spec.gpus;
          if (remaining(j, false) > at) {
            if (cols[i].keep >= 0) use.add(cols[i].keep, g);
            if (cols[i].z >= 0) use.add(cols[i].z, g);
            for (const auto& [n, c] : cols[i].x) use.add(c, g);
          }
          const double r = remaining(j, j.status == JobStatus::kRunning);
          for (size_t l = 0; l < later[i].size() && grid[l] <= at; ++l)
            if (grid[l] + r > at) use.add(later[i][l], g);
        }
        extra_rows.push_back(use), extra_sense.push_back('L'), extra_rhs.push_back(devices - fixed_use);
      }
    }
    {
      std::vector<const Row*> rows;
      std::vector<double> row_lb, row_ub;
      auto add_row = [&](const Row& r, char sense, double rhs) {
        if (r.cols.empty()) return;
        rows.push_back(&r);
        row_lb.push_back(sense == 'E' ? rhs : -std::numeric_limits<double>::max());
        row_ub.push_back(rhs);
      };
      for (int n = 0; n < nodes; ++n) add_row(node_rows[n], 'L', cap[n]);
      add_row(global, 'L', total_cap);
      for (size_t r = 0; r < extra_rows.size(); ++r) add_row(extra_rows[r], extra_sense[r], extra_rhs[r]);
      // Column-major (CSC) matrix from the rows.
      const int ncols = static_cast<int>(col_lb.size());
      std::vector<CoinBigIndex> start(ncols + 1, 0);
      for (const Row* r : rows)
        for (int c : r->cols) ++start[c + 1];
      for (int c = 0; c < ncols; ++c) start[c + 1] += start[c];
      std::vector<int> index(start[ncols]);
      std::vector<double> value(start[ncols]);
      std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
      for (size_t ri = 0; ri < rows.size(); ++ri)
        for (size_t k = 0; k < rows[ri]->cols.size(); ++k) {
          CoinBigIndex at = fill[rows[ri]->cols[k]]++;
          index[at] = static_cast<int>(ri);
          value[at] = rows[ri]->coefs[k];
        }
      Cbc_loadProblem(m, ncols, static_cast<int>(rows.size()), start.data(), index.data(), value.data(), col_lb.data(),
                      col_ub.data(), col_obj.data(), row_lb.data(), row_ub.data());
      for (int c = 0; c < ncols; ++c)
        if (col_int[c]) Cbc_setInteger(m, c);
      Cbc_setObjSense(m, -1);
    }

    // The greedy answer as the incumbent.
    std::vector<int> mip_idx;
    std::vector<double> mip_val;
    for (size_t i = 0; i < q_end; ++i) {
      const Job& j = *p.order[i];
      if (cols[i].keep >= 0) {
        bool preempted = std::binary_search(pre.begin(), pre.end(), j.id);
        // A migrated job (preempted and restarted) counts as not kept; the program cannot move jobs.
        if (!preempted) mip_idx.push_back(cols[i].keep), mip_val.push_back(1);
        continue;
      }
      auto it = started.find(j.id);
      if (it == started.end()) continue;
      const Placement& pl = *it->second;
      if (cols[i].z >= 0) mip_idx.push_back(cols[i].z), mip_val.push_back(1);
      for (const auto& [n, c] : cols[i].x)
        if (pl.size() == 1 && pl[0].node == n) mip_idx.push_back(c), mip_val.push_back(1);
      for (const Slice& sl : pl) {
        for (const auto& [n, c] : cols[i].u)
          if (n == sl.node) mip_idx.push_back(c), mip_val.push_back(sl.count);
        for (const auto& [n, c] : cols[i].w)
          if (n == sl.node) mip_idx.push_back(c), mip_val.push_back(1);
      }
    }
    Cbc_setMIPStartI(m, static_cast<int>(mip_idx.size()), mip_idx.data(), mip_val.data());
    Cbc_setLogLevel(m, log_);
    // These programs are small and their LP relaxation is tight; CBC's root machinery (presolve,
    // cut generators, feasibility pump, RINS) costs ~40x more CPU than plain branch and bound on
    // them for the same optimum (measured on random clusters of 8-16 devices).
    if (!full_cbc_) {
      for (const char* off : {"presolve", "preprocess", "cuts", "heur", "feas", "rins"})
        Cbc_setParameter(m, off, "off");
      Cbc_setParameter(m, "strategy", "0");
      Cbc_setParameter(m, "strong", "0");  // the greedy incumbent is usually optimal: no strong branching
    }
    // Identical nodes make the packing symmetric, and proving optimality can take the branch
    // and bound a long time for nothing: a 0.1% gap and a node budget keep each solve short.
    Cbc_setMaximumSeconds(m, time_limit_);
    Cbc_setAllowableFractionGap(m, gap_);
    Cbc_setMaximumNodes(m, max_nodes_);
    Cbc_solve(m);
    const double* x = Cbc_bestSolution(m);
    if (!x) return std::nullopt;

    // Decode: preemptions, node-bound starts, then one-device jobs and the fill in greedy order.
    Decision d;
    FreeMap free = s.cluster->free();
    std::vector<char> done(p.order.size(), 0), preempted(p.order.size(), 0);
    for (size_t i = 0; i < q_end; ++i)
      if (cols[i].keep >= 0 && x[cols[i].keep] < 0.5) {
        d.preempt.push_back(p.order[i]->id);
        preempted[i] = 1;
        free.give(held[i]);
      }
    for (size_t i = 0; i < q_end; ++i) {
      Placement pl;
      for (const auto& [n, c] : cols[i].x)
        if (x[c] > 0.5) pl.push_back({n, p.order[i]->spec.gpus});
      for (const auto& [n, c] : cols[i].u)
        if (x[c] > 0.5) pl.push_back({n, static_cast<int>(std::lround(x[c]))});
      if (pl.empty()) continue;
      const Job& j = *p.order[i];
      if (!placement_problem(free, pl, j.spec.gpus, j.spec.mem_per_gpu).empty()) return std::nullopt;
      free.take(pl);
      d.start.push_back({j.id, pl});
      done[i] = 1;
    }
    auto try_start = [&](size_t i) {
      const Job& j = *p.order[i];
      if (done[i] || (j.status != JobStatus::kWaiting && !preempted[i])) return;
      if (auto pl = free.best_fit(j.spec.gpus, j.spec.mem_per_gpu)) {
        free.take(*pl);
        d.start.push_back({j.id, std::move(*pl)});
        done[i] = 1;
      }
    };
    for (size_t i = 0; i < q_end; ++i)
      if (cols[i].z >= 0 && cols[i].u.empty() && x[cols[i].z] > 0.5) try_start(i);
    // The fill, in greedy order; a preempted job that fits elsewhere migrates rather than idle.
    for (size_t i = 0; i < p.order.size() && free.total_free() > 0; ++i) try_start(i);
    (void)greedy_score;
    return d;
  }

 private:
  double time_limit_;
  int max_jobs_;
  double margin_;
  double gap_;
  int max_nodes_;
  int log_;        // CBC's log level (0: silent)
  bool full_cbc_;  // keep CBC's default presolve, cuts and heuristics
};

#endif  // EMBER_HAVE_CBC

}  // namespace

std::unique_ptr<Policy> make_ilp(const PolicyParams& p) {
  ParamReader r("ilp", p);
  SearchPolicy::Options o = read_search_options(r);
  double time_limit = r.number("time_limit", 1.0, 0.01, 1e6);
  int max_jobs = static_cast<int>(r.number("max_jobs", 2000, 1, 1e7));
  double gap = r.number("gap", 1e-3, 0, 1);
  int max_nodes = static_cast<int>(r.number("max_nodes", 20, 0, 1e9));
  int log = static_cast<int>(r.number("log", 0, 0, 4));
  bool full_cbc = r.number("full_cbc", 0, 0, 1) != 0;
  r.finish();
#ifdef EMBER_HAVE_CBC
  return std::make_unique<Ilp>(o, time_limit, max_jobs, gap, max_nodes, log, full_cbc);
#else
  (void)o, (void)time_limit, (void)max_jobs, (void)gap, (void)max_nodes, (void)log, (void)full_cbc;
  EMBER_FAIL("policy 'ilp': this build has no CBC solver (install coinor-libcbc-dev and re-run cmake)");
#endif
}

}  // namespace ember::sched
