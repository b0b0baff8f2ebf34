// A genetic algorithm over the contested jobs' order and the top jobs' nodes (scheduler/search.h).
// The first population is the greedy answer and mutants of it; children come from binary
// tournaments, order crossover on the permutation and uniform crossover on the nodes, then one
// mutation; the best two of each generation survive unchanged, so the best never gets worse.
#include <algorithm>

#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/search.h"

namespace ember::sched {
namespace {

using Candidate = SearchProblem::Candidate;

class Genetic final : public SearchPolicy {
 public:
  Genetic(Options o, int population, int generations, std::uint64_t seed)
      : SearchPolicy(o), pop_size_(population), generations_(generations), rng_(seed) {}
  std::string name() const override { return "ga"; }

 protected:
  std::optional<Decision> improve(const SearchProblem& p, const Decision&, double greedy_score) override {
    std::vector<std::pair<double, Candidate>> pop;
    pop.push_back({greedy_score, p.greedy()});
    while (static_cast<int>(pop.size()) < pop_size_) {
      Candidate c = p.greedy();
      for (int k = 1 + static_cast<int>(rng_() % 3); k > 0; --k) p.mutate(c, rng_);
      pop.push_back({p.score(c), std::move(c)});
    }
    auto by_score = [](const auto& a, const auto& b) { return a.first > b.first; };
    for (int gen = 0; gen < generations_; ++gen) {
      std::sort(pop.begin(), pop.end(), by_score);
      std::vector<std::pair<double, Candidate>> next(pop.begin(), pop.begin() + std::min<size_t>(2, pop.size()));
      while (next.size() < pop.size()) {
        Candidate child = crossover(pick(pop).second, pick(pop).second);
        p.mutate(child, rng_);
        next.push_back({p.score(child), std::move(child)});
      }
      pop = std::move(next);
    }
    auto best =
        std::max_element(pop.begin(), pop.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (best->first <= greedy_score) return std::nullopt;
    return p.decode(best->second);
  }

 private:
  const std::pair<double, Candidate>& pick(const std::vector<std::pair<double, Candidate>>& pop) {
    const auto& a = pop[rng_() % pop.size()];
    const auto& b = pop[rng_() % pop.size()];
    return a.first >= b.first ? a : b;
  }

  // Order crossover: a slice of one parent's permutation, the rest in the other's order.
  Candidate crossover(const Candidate& a, const Candidate& b) {
    Candidate c;
    size_t n = a.perm.size();
    c.perm.assign(n, -1);
    if (n > 0) {
      size_t i = rng_() % n, j = rng_() % n;
      if (i > j) std::swap(i, j);
      std::vector<int> taken;
      for (size_t k = i; k <= j; ++k) c.perm[k] = a.perm[k], taken.push_back(a.perm[k]);
      std::sort(taken.begin(), taken.end());
      size_t out = 0;
      for (int x : b.perm) {
        if (std::binary_search(taken.begin(), taken.end(), x)) continue;
        while (c.perm[out] >= 0) ++out;
        c.perm[out] = x;
      }
    }
    c.node = a.node;
    for (size_t k = 0; k < c.node.size(); ++k)
      if (rng_() & 1) c.node[k] = b.node[k];
    // Drawn only when the parents differ, so that without reservations (the look-ahead off) the
    // random stream, and so every result, is what it was before they existed.
    c.hold = a.hold == b.hold || (rng_() & 1) ? a.hold : b.hold;
    return c;
  }

  int pop_size_, generations_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Policy> make_genetic(const PolicyParams& p) {
  ParamReader r("ga", p);
  SearchPolicy::Options o = read_search_options(r);
  int population = static_cast<int>(r.number("population", 16, 2, 1e6));
  int generations = static_cast<int>(r.number("generations", 12, 1, 1e6));
  auto seed = static_cast<std::uint64_t>(r.number("seed", 1, 0, 1e18));
  r.finish();
  return std::make_unique<Genetic>(o, population, generations, seed);
}

}  // namespace ember::sched
