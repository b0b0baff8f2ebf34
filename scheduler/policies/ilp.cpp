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

// The integer program of one decision (the file's comment): the batch, its columns and rows, the
// greedy incumbent and the decoding of a solution. The members are what the steps share.
class IlpProgram {
 public:
  IlpProgram(const SearchProblem& p, const Decision& greedy, double margin, int max_jobs)
      : p_(p), s_(*p.state), t_(s_.cluster->topology()), nodes_(t_.num_nodes()) {
    // The batch.
    double cum = 0;
    while (q_end_ < p.order.size() && cum < s_.cluster->num_devices() + margin && static_cast<int>(q_end_) < max_jobs)
      cum += p.order[q_end_++]->spec.gpus;
    // What greedy did: the incumbent, and the commitments above the contested window.
    for (const Start& st : greedy.start) started_[st.job] = &st.placement;
    pre_.assign(greedy.preempt.begin(), greedy.preempt.end());
    std::sort(pre_.begin(), pre_.end());
  }

  // Sets the capacity and the objective's scale; false when no contested job has any value.
  bool prepare() {
    // Capacity: the free devices plus those of the running jobs the program may preempt. A
    // committed running job keeps its devices whatever the program does, so it gets no column
    // at all (most of a large cluster's running jobs: leaving them out keeps the program small).
    cap_.resize(nodes_);
    for (int n = 0; n < nodes_; ++n) cap_[n] = s_.cluster->free().free(n);
    held_.resize(q_end_);
    for (size_t i = 0; i < q_end_; ++i)
      if (p_.order[i]->status == JobStatus::kRunning && !committed(i)) {
        held_[i] = placement_of(t_, *p_.order[i]);
        for (const Slice& sl : held_[i]) cap_[sl.node] += sl.count;
      }
    for (int c : cap_) total_cap_ += c;
    double vmax = 0;
    for (size_t i = 0; i < q_end_; ++i)
      if (!committed(i)) vmax = std::max(vmax, p_.objective.value(*p_.order[i]) + p_.objective.penalty(*p_.order[i]));
    if (vmax <= 0) return false;
    scale_ = 1000.0 / vmax;
    // With a look-ahead the program optimises the projection's objective (search.h): each job's
    // min(completion, horizon), here as the seconds of the horizon it saves, horizon - min(start +
    // remaining, horizon), for starting now or at one of the later times of `grid`, with the
    // devices counted at each of those times (no arrivals and no preemption after this decision,
    // as in the projection; a preempted job restarts later with the preemption cost added).
    H_ = p_.objective.horizon;
    look_ = H_ > 0;
    hscale_ = look_ ? 1000.0 / H_ : 0.0;
    if (look_)  // later start times: H/128, H/64, ..., H/2
      for (int k = kGridPoints; k >= 1; --k) grid_.push_back(H_ / std::pow(2.0, k));
    return true;
  }

  // Every column and row: the batch's jobs, and with a look-ahead their later starts and the
  // devices in use at each grid time.
  void build() {
    node_rows_.resize(nodes_);
    cols_.resize(q_end_);
    for (size_t i = 0; i < q_end_; ++i) add_job(i);
    if (look_) {
      add_later_starts();
      add_grid_capacity();
    }
  }

  // Hands the program to CBC in one call (column-major), a maximisation over integer columns.
  void load(Cbc_Model* m) const {
    std::vector<const Row*> rows;
    std::vector<double> row_lb, row_ub;
    auto add_row = [&](const Row& r, char sense, double rhs) {
      if (r.cols.empty()) return;
      rows.push_back(&r);
      row_lb.push_back(sense == 'E' ? rhs : -std::numeric_limits<double>::max());
      row_ub.push_back(rhs);
    };
    for (int n = 0; n < nodes_; ++n) add_row(node_rows_[n], 'L', cap_[n]);
    add_row(global_, 'L', total_cap_);
    for (size_t r = 0; r < extra_rows_.size(); ++r) add_row(extra_rows_[r], extra_sense_[r], extra_rhs_[r]);
    // Column-major (CSC) matrix from the rows.
    const int ncols = static_cast<int>(col_lb_.size());
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
    Cbc_loadProblem(m, ncols, static_cast<int>(rows.size()), start.data(), index.data(), value.data(), col_lb_.data(),
                    col_ub_.data(), col_obj_.data(), row_lb.data(), row_ub.data());
    for (int c = 0; c < ncols; ++c)
      if (col_int_[c]) Cbc_setInteger(m, c);
    Cbc_setObjSense(m, -1);
  }

  // The greedy answer as the incumbent.
  void set_incumbent(Cbc_Model* m) const {
    std::vector<int> mip_idx;
    std::vector<double> mip_val;
    for (size_t i = 0; i < q_end_; ++i) {
      const Job& j = *p_.order[i];
      if (cols_[i].keep >= 0) {
        bool preempted = std::binary_search(pre_.begin(), pre_.end(), j.id);
        // A migrated job (preempted and restarted) counts as not kept; the program cannot move jobs.
        if (!preempted) mip_idx.push_back(cols_[i].keep), mip_val.push_back(1);
        continue;
      }
      auto it = started_.find(j.id);
      if (it == started_.end()) continue;
      const Placement& pl = *it->second;
      if (cols_[i].z >= 0) mip_idx.push_back(cols_[i].z), mip_val.push_back(1);
      for (const auto& [n, c] : cols_[i].x)
        if (pl.size() == 1 && pl[0].node == n) mip_idx.push_back(c), mip_val.push_back(1);
      for (const Slice& sl : pl) {
        for (const auto& [n, c] : cols_[i].u)
          if (n == sl.node) mip_idx.push_back(c), mip_val.push_back(sl.count);
        for (const auto& [n, c] : cols_[i].w)
          if (n == sl.node) mip_idx.push_back(c), mip_val.push_back(1);
      }
    }
    Cbc_setMIPStartI(m, static_cast<int>(mip_idx.size()), mip_idx.data(), mip_val.data());
  }

  // The decision of solution x: preemptions, node-bound starts, then one-device jobs and the fill
  // in greedy order (nothing when a start does not fit).
  std::optional<Decision> decode(const double* x) const {
    Decision d;
    FreeMap free = s_.cluster->free();
    std::vector<char> done(p_.order.size(), 0), preempted(p_.order.size(), 0);
    for (size_t i = 0; i < q_end_; ++i)
      if (cols_[i].keep >= 0 && x[cols_[i].keep] < 0.5) {
        d.preempt.push_back(p_.order[i]->id);
        preempted[i] = 1;
        free.give(held_[i]);
      }
    for (size_t i = 0; i < q_end_; ++i) {
      Placement pl;
      for (const auto& [n, c] : cols_[i].x)
        if (x[c] > 0.5) pl.push_back({n, p_.order[i]->spec.gpus});
      for (const auto& [n, c] : cols_[i].u)
        if (x[c] > 0.5) pl.push_back({n, static_cast<int>(std::lround(x[c]))});
      if (pl.empty()) continue;
      const Job& j = *p_.order[i];
      if (!placement_problem(free, pl, j.spec.gpus, j.spec.mem_per_gpu).empty()) return std::nullopt;
      free.take(pl);
      d.start.push_back({j.id, pl});
      done[i] = 1;
    }
    auto try_start = [&](size_t i) {
      const Job& j = *p_.order[i];
      if (done[i] || (j.status != JobStatus::kWaiting && !preempted[i])) return;
      if (auto pl = free.best_fit(j.spec.gpus, j.spec.mem_per_gpu)) {
        free.take(*pl);
        d.start.push_back({j.id, std::move(*pl)});
        done[i] = 1;
      }
    };
    for (size_t i = 0; i < q_end_; ++i)
      if (cols_[i].z >= 0 && cols_[i].u.empty() && x[cols_[i].z] > 0.5) try_start(i);
    // The fill, in greedy order; a preempted job that fits elsewhere migrates rather than idle.
    for (size_t i = 0; i < p_.order.size() && free.total_free() > 0; ++i) try_start(i);
    return d;
  }

 private:
  // Per batch job: its columns.
  struct Cols {
    int keep = -1, z = -1;
    std::vector<std::pair<int, int>> x, u, w;  // (node, column)
  };

  // Jobs ranked above the contested window that greedy kept or started stay in (the program
  // still chooses where the started ones go): the search is over the contested jobs, as for sa
  // and ga, and the branch and bound stays small.
  bool committed(size_t i) const {
    if (i >= p_.fixed) return false;
    const Job& j = *p_.order[i];
    return j.status == JobStatus::kRunning ? !std::binary_search(pre_.begin(), pre_.end(), j.id)
                                           : started_.count(j.id) > 0;
  }
  double remaining(const Job& j, bool preempted) const { return p_.objective.projected_remaining(j, preempted); }
  double saved(double start, double r) const { return (H_ - std::min(start + r, H_)) * hscale_; }

  // Columns and rows are collected first and handed to CBC in one call (load): adding them one at
  // a time regrows CBC's packed matrix at every call, which cost more than the solve itself.
  int add_col(double ub, double obj, bool integer, double lb = 0.0) {
    col_lb_.push_back(lb), col_ub_.push_back(ub), col_obj_.push_back(obj), col_int_.push_back(integer ? 1 : 0);
    return static_cast<int>(col_lb_.size()) - 1;
  }
  void add_extra_row(const Row& r, char sense, double rhs) {
    extra_rows_.push_back(r), extra_sense_.push_back(sense), extra_rhs_.push_back(rhs);
  }

  // Batch job i's columns: kept (a running job), started anywhere (one device), on one of the
  // nodes that can take it whole, or spread over nodes (a wider gang).
  void add_job(size_t i) {
    const Job& j = *p_.order[i];
    const int g = j.spec.gpus;
    const bool running = j.status == JobStatus::kRunning;
    const double v = committed(i) ? 0.0 : look_ ? saved(0, remaining(j, false)) : p_.objective.value(j) * scale_;
    if (running) {
      // A committed job's value is a constant: leaving it out of the objective keeps the
      // relative gap about the contested jobs, whose values are a sliver of the total.
      if (committed(i)) return;  // its devices are not in `cap_`
      cols_[i].keep = add_col(1, look_ ? v : v + p_.objective.penalty(j) * scale_, true);
      for (const Slice& sl : held_[i]) node_rows_[sl.node].add(cols_[i].keep, sl.count);
      global_.add(cols_[i].keep, g);
      return;
    }
    const double mem = j.spec.mem_per_gpu;
    const int k = t_.min_nodes(g, mem);
    bool anywhere = g == 1;
    for (int n = 0; n < nodes_ && anywhere; ++n) anywhere = t_.eligible(n, mem);
    if (k < 0) return;
    if (anywhere) {
      cols_[i].z = add_col(1, v, true, committed(i) ? 1 : 0);
      global_.add(cols_[i].z, 1);
    } else if (k == 1) {
      Row one;
      for (int n = 0; n < nodes_; ++n) {
        if (!t_.eligible(n, mem) || cap_[n] < g) continue;
        int c = add_col(1, v, true);
        cols_[i].x.push_back({n, c});
        node_rows_[n].add(c, g);
        global_.add(c, g);
        one.add(c, 1);
      }
      if (!one.cols.empty()) add_extra_row(one, committed(i) ? 'E' : 'L', 1);
    } else {
      add_spread_gang(i, v, k);
    }
  }

  // A gang wider than a node: z_j, integer devices u_jn on each node it may use and flags w_jn
  // for the nodes it uses, which number at most k (the fewest nodes it spans) times z_j.
  void add_spread_gang(size_t i, double v, int k) {
    const Job& j = *p_.order[i];
    const int g = j.spec.gpus;
    const double mem = j.spec.mem_per_gpu;
    cols_[i].z = add_col(1, v, true, committed(i) ? 1 : 0);
    Row sum, span;
    sum.add(cols_[i].z, -g);
    span.add(cols_[i].z, -k);
    for (int n = 0; n < nodes_; ++n) {
      if (!t_.eligible(n, mem) || cap_[n] == 0) continue;
      int ub = std::min(cap_[n], g);
      int uc = add_col(ub, 0, true), wc = add_col(1, 0, true);
      cols_[i].u.push_back({n, uc});
      cols_[i].w.push_back({n, wc});
      node_rows_[n].add(uc, 1);
      global_.add(uc, 1);
      sum.add(uc, 1);
      span.add(wc, 1);
      Row link;
      link.add(uc, 1);
      link.add(wc, -ub);
      add_extra_row(link, 'L', 0);
    }
    add_extra_row(sum, 'E', 0);
    add_extra_row(span, 'L', 0);
  }

  // Each contested job may instead start at a later time of the grid (a running one restarts
  // there, preemption cost added); at most one start per job.
  void add_later_starts() {
    later_.assign(q_end_, {});
    for (size_t i = 0; i < q_end_; ++i) {
      const Job& j = *p_.order[i];
      const bool running = j.status == JobStatus::kRunning;
      if (committed(i) || (cols_[i].keep < 0 && cols_[i].z < 0 && cols_[i].x.empty())) continue;
      Row once;
      for (const auto& [n, c] : cols_[i].x) once.add(c, 1);
      if (cols_[i].keep >= 0) once.add(cols_[i].keep, 1);
      if (cols_[i].z >= 0) once.add(cols_[i].z, 1);
      for (double t0 : grid_) {
        const int c = add_col(1, saved(t0, remaining(j, running)), true);
        later_[i].push_back(c);
        once.add(c, 1);
      }
      add_extra_row(once, 'L', 1);
    }
  }

  // The devices in use at each grid time: the running jobs the program cannot touch (a
  // constant), the jobs it keeps or starts now that are still running then, and the later
  // starts whose run covers it.
  void add_grid_capacity() {
    const int devices = s_.cluster->num_devices();
    std::unordered_set<JobId> in_program;
    for (size_t i = 0; i < q_end_; ++i)
      if (cols_[i].keep >= 0) in_program.insert(p_.order[i]->id);
    for (size_t k = 0; k < grid_.size(); ++k) {
      const double at = grid_[k];
      double fixed_use = 0;
      for (const Job* j : s_.running)
        if (!in_program.count(j->id) && remaining(*j, false) > at) fixed_use += j->spec.gpus;
      Row use;
      for (size_t i = 0; i < q_end_; ++i) {
        const Job& j = *p_.order[i];
        const int g = j.spec.gpus;
        if (remaining(j, false) > at) {
          if (cols_[i].keep >= 0) use.add(cols_[i].keep, g);
          if (cols_[i].z >= 0) use.add(cols_[i].z, g);
          for (const auto& [n, c] : cols_[i].x) use.add(c, g);
        }
        const double r = remaining(j, j.status == JobStatus::kRunning);
        for (size_t l = 0; l < later_[i].size() && grid_[l] <= at; ++l)
          if (grid_[l] + r > at) use.add(later_[i][l], g);
      }
      add_extra_row(use, 'L', devices - fixed_use);
    }
  }

  const SearchProblem& p_;
  const SchedState& s_;
  const Topology& t_;
  const int nodes_;
  size_t q_end_ = 0;  // the batch: p.order[0, q_end_)
  std::unordered_map<JobId, const Placement*> started_;
  std::vector<JobId> pre_;  // greedy's preemptions, sorted
  std::vector<int> cap_;
  std::vector<Placement> held_;  // per batch job: the devices of a running job the program may preempt
  int total_cap_ = 0;
  double scale_ = 0, H_ = 0, hscale_ = 0;
  bool look_ = false;
  std::vector<double> grid_;
  std::vector<double> col_lb_, col_ub_, col_obj_;
  std::vector<char> col_int_;
  std::vector<Row> node_rows_;
  Row global_;
  std::vector<Row> extra_rows_;
  std::vector<char> extra_sense_;
  std::vector<double> extra_rhs_;
  std::vector<Cols> cols_;
  std::vector<std::vector<int>> later_;  // per batch job: its later-start columns, one per grid time
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
    IlpProgram program(p, greedy, margin_, max_jobs_);
    if (!program.prepare()) return std::nullopt;
    Cbc_Model* m = Cbc_newModel();
    struct Guard {
      Cbc_Model* m;
      ~Guard() { Cbc_deleteModel(m); }
    } guard{m};
    program.build();
    program.load(m);
    program.set_incumbent(m);
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
    (void)greedy_score;
    return program.decode(x);
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
