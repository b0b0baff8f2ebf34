// Simulated annealing over the contested jobs' order and the top jobs' nodes (scheduler/search.h),
// starting from the greedy answer. The temperature starts at a fifth of a typical job's value (with
// a look-ahead horizon: of a typical job's projected seconds) and cools geometrically a
// thousandfold over `iters` steps; the best candidate ever seen is kept.
#include <cmath>

#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/search.h"

namespace ember::sched {
namespace {

class Annealing final : public SearchPolicy {
 public:
  Annealing(Options o, int iters, std::uint64_t seed) : SearchPolicy(o), iters_(iters), rng_(seed) {}
  std::string name() const override { return "sa"; }

 protected:
  std::optional<Decision> improve(const SearchProblem& p, const Decision&, double greedy_score) override {
    // A typical change of the score: a job's value, or with a look-ahead a job's projected
    // seconds (swapping two jobs moves each completion by about the other's run time).
    double scale = 0;
    const double h = p.objective.horizon;
    for (size_t i = 0; i < p.window_end; ++i)
      scale += h > 0 ? std::min(p.order[i]->estimated_remaining(p.objective.now), h) : p.objective.value(*p.order[i]);
    scale /= std::max<size_t>(1, p.window_end);
    if (scale <= 0) return std::nullopt;
    const double t0 = 0.2 * scale, alpha = std::pow(1e-3, 1.0 / std::max(1, iters_));
    SearchProblem::Candidate cur = p.greedy(), best = cur;
    double cur_s = greedy_score, best_s = greedy_score, temp = t0;
    std::uniform_real_distribution<double> u(0, 1);
    for (int it = 0; it < iters_; ++it, temp *= alpha) {
      SearchProblem::Candidate next = cur;
      p.mutate(next, rng_);
      double sc = p.score(next);
      if (sc >= cur_s || u(rng_) < std::exp((sc - cur_s) / temp)) {
        cur = std::move(next);
        cur_s = sc;
        if (cur_s > best_s) best = cur, best_s = cur_s;
      }
    }
    if (best_s <= greedy_score) return std::nullopt;
    return p.decode(best);
  }

 private:
  int iters_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Policy> make_annealing(const PolicyParams& p) {
  ParamReader r("sa", p);
  SearchPolicy::Options o = read_search_options(r);
  int iters = static_cast<int>(r.number("iters", 200, 1, 1e9));
  auto seed = static_cast<std::uint64_t>(r.number("seed", 1, 0, 1e18));
  r.finish();
  return std::make_unique<Annealing>(o, iters, seed);
}

}  // namespace ember::sched
