#include "scheduler/teams.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/lp.h"
#include "scheduler/params.h"
#include "scheduler/ranking.h"
#include "scheduler/registry.h"

namespace ember::sched {

Shares parse_shares(const std::string& text, const std::string& name, int capacity) {
  Shares shares;
  std::istringstream in(text);
  std::string line;
  long total = 0;
  for (int no = 1; std::getline(in, line); ++no) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string team, count, extra;
    if (!(words >> team)) continue;
    EMBER_CHECK(words >> count && !(words >> extra), name, ":", no,
                ": expected 'TEAM DEVICES' (a team name and its guaranteed device count), got '", line, "'");
    int n = 0;
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
    EMBER_CHECK(ec == std::errc() && end == count.data() + count.size() && n >= 0, name, ":", no, ": team '", team,
                "': expected a whole number of devices >= 0, got '", count, "'");
    EMBER_CHECK(shares.emplace(team, n).second, name, ":", no, ": team '", team, "' has a share already");
    total += n;
  }
  EMBER_CHECK(!shares.empty(), name, ": no teams (expected lines of 'TEAM DEVICES')");
  EMBER_CHECK(total <= capacity, name, ": the shares add up to ", total, " devices but the cluster has ", capacity,
              "; a guarantee the cluster cannot keep is none");
  return shares;
}

Shares read_shares(const std::string& path, int capacity) {
  // A folder opens as a stream that reads nothing: say so instead of "no teams".
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), "quota file '", path,
              "': is a folder, expected a file of 'TEAM DEVICES' lines");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "quota file '", path, "': cannot open it (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  EMBER_CHECK(!in.bad(), "quota file '", path, "': read error");
  return parse_shares(text.str(), "quota file '" + path + "'", capacity);
}

void check_teams(const std::vector<JobSpec>& jobs, const Shares& shares, const std::string& source) {
  for (const JobSpec& j : jobs) {
    if (shares.count(j.queue)) continue;
    std::string known;
    for (const auto& [t, n] : shares) known += (known.empty() ? "" : ", ") + t;
    EMBER_FAIL("job '", j.name, "' belongs to team '", j.queue, "', which has no share in ", source,
               " (teams there: ", known, "); give it one, 0 for a team that only borrows");
  }
}

std::map<std::string, double> team_demand(const std::vector<JobSpec>& history) {
  std::map<std::string, double> demand;
  if (history.empty()) return demand;
  double first = kInf, last = -kInf, end = -kInf;
  for (const JobSpec& j : history) {
    EMBER_CHECK(j.duration >= 0, "team demand: job '", j.name,
                "' has no duration; the static level plans from the run times of past jobs");
    first = std::min(first, j.submit), last = std::max(last, j.submit), end = std::max(end, j.submit + j.duration);
  }
  double window = last > first ? last - first : end - first;
  if (window <= 0) window = 1;
  for (const JobSpec& j : history) demand[j.queue] += j.gpus * j.duration / window;
  return demand;
}

Shares uniform_minimum(const std::map<std::string, double>& demand, int devices) {
  Shares m;
  for (const auto& [t, v] : demand) m[t] = devices;
  return m;
}

Shares widest_gangs(const std::vector<JobSpec>& jobs) {
  Shares m;
  for (const JobSpec& j : jobs) m[j.queue] = std::max(m[j.queue], j.gpus);
  return m;
}

std::vector<DeviceType> share_of_types(const std::vector<DeviceType>& cluster, int devices) {
  long total = 0;
  for (const DeviceType& t : cluster) total += t.count;
  EMBER_CHECK(devices >= 1 && devices <= total, "share of a typed cluster: expected 1 to ", total, " devices, got ",
              devices);
  std::vector<int> count(cluster.size());
  std::vector<std::pair<double, size_t>> rest;  // (remainder, type)
  int given = 0;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const double exact = static_cast<double>(devices) * cluster[i].count / static_cast<double>(total);
    count[i] = static_cast<int>(std::floor(exact));
    given += count[i];
    rest.push_back({exact - count[i], i});
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < devices; ++k, ++given) ++count[rest[k].second];
  std::vector<DeviceType> out;
  for (size_t i = 0; i < cluster.size(); ++i)
    if (count[i] > 0) out.push_back({cluster[i].name, count[i]});
  return out;
}

Shares plan_shares(const std::map<std::string, double>& demand, int capacity, const Shares& minimum) {
  EMBER_CHECK(!demand.empty(), "team shares: no teams to plan for");
  EMBER_CHECK(capacity >= 0, "team shares: expected a capacity >= 0, got ", capacity);
  std::vector<std::string> teams;
  std::vector<double> d;
  std::vector<int> least;
  long floor_total = 0;
  for (const auto& [t, v] : demand) {
    EMBER_CHECK(v >= 0 && std::isfinite(v), "team shares: team '", t, "' has demand ", v, "; expected >= 0");
    auto it = minimum.find(t);
    const int m = it == minimum.end() ? 0 : it->second;
    EMBER_CHECK(m >= 0, "team shares: team '", t, "' has minimum share ", m, "; expected >= 0");
    teams.push_back(t), d.push_back(v), least.push_back(m);
    floor_total += m;
  }
  EMBER_CHECK(floor_total <= capacity, "team shares: the minimum shares of the ", demand.size(), " teams add up to ",
              floor_total, " devices but the cluster has ", capacity);
  const int n = static_cast<int>(teams.size());
  // share[t] >= least[t], satisfied[t] <= min(share[t], demand[t]), sum(share) <= capacity,
  // satisfied[t] >= z * demand[t].
  auto build = [&](LinearProgram& lp, std::vector<int>& s, std::vector<int>& u, int& z) {
    for (int t = 0; t < n; ++t) {
      s.push_back(lp.add_var(least[t], capacity));
      u.push_back(lp.add_var(0, d[t]));
      lp.add_row({{u[t], 1}, {s[t], -1}}, -kInf, 0);
    }
    std::vector<std::pair<int, double>> all;
    for (int t = 0; t < n; ++t) all.push_back({s[t], 1});
    lp.add_row(all, -kInf, capacity);
    z = lp.add_var(0, 1);
    for (int t = 0; t < n; ++t)
      if (d[t] > 0) lp.add_row({{u[t], 1}, {z, -d[t]}}, 0, kInf);
  };
  LinearProgram most;
  std::vector<int> s, u;
  int z = -1;
  build(most, s, u, z);
  for (int t = 0; t < n; ++t) most.set_objective(u[t], 1);
  const double satisfied = most.maximize("team shares (most demand satisfied)").objective;

  LinearProgram fair;
  s.clear(), u.clear();
  build(fair, s, u, z);
  std::vector<std::pair<int, double>> sum_u;
  for (int t = 0; t < n; ++t) sum_u.push_back({u[t], 1});
  fair.add_row(sum_u, satisfied - 1e-7 * (1 + satisfied), kInf);
  fair.set_objective(z, 1);
  const std::vector<double> x = fair.maximize("team shares (fairest split)").x;

  std::vector<double> share(n);
  double used = 0, total_demand = 0;
  for (int t = 0; t < n; ++t) {
    share[t] = std::max<double>(least[t], x[u[t]]);
    used += share[t], total_demand += d[t];
  }
  const double left = std::max(0.0, capacity - used);
  for (int t = 0; t < n; ++t) share[t] += left * (total_demand > 0 ? d[t] / total_demand : 1.0 / n);
  // Whole devices by largest remainder (ties: team name order), never above the capacity.
  Shares out;
  std::vector<std::pair<double, int>> rem;
  long given = 0;
  for (int t = 0; t < n; ++t) {
    const int whole = static_cast<int>(std::floor(share[t] + 1e-9));
    out[teams[t]] = whole;
    given += whole;
    rem.push_back({share[t] - whole, t});
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; k < rem.size() && given < capacity; ++k, ++given) ++out[teams[rem[k].second]];
  return out;
}

namespace {

class TeamQuotas final : public Policy {
 public:
  TeamQuotas(std::unique_ptr<Policy> inner, RankingPolicy* ranking, Shares shares, QuotaOptions opt)
      : inner_(std::move(inner)),
        ranking_(ranking),
        shares_(std::move(shares)),
        opt_(opt),
        strict_(opt.strict > 0 || (opt.strict < 0 && !inner_->traits().preemptive)) {
    for (const auto& [team, n] : shares_) {
      index_.emplace(team, static_cast<int>(share_.size()));
      share_.push_back(n);
    }
  }
  std::string name() const override { return inner_->name() + "+quota"; }
  bool strict() const { return strict_; }
  PolicyTraits traits() const override {
    PolicyTraits t = inner_->traits();
    t.preemptive = true;  // reclaiming lent devices preempts
    t.work_conserving = true;
    return t;
  }

  Decision decide(const SchedState& s) override {
    reclaim_at_ = kInf;
    average_demand(s);
    if (s.waiting.empty()) return {};
    ranking_->prepare(s);
    const bool preemptive = inner_->traits().preemptive;
    ranked_.clear();
    for (const Job* j : s.running) {
      Ranked r = preemptive ? ranking_->rank(*j, s.now) : Ranked{j->last_start, 0, 0, j};
      r.k0 = 0;
      ranked_.push_back(r);
    }
    for (const Job* j : s.waiting) {
      Ranked r = ranking_->rank(*j, s.now);
      r.k0 = preemptive ? 0 : 1;
      ranked_.push_back(r);
    }
    // Each team's jobs in the policy's order (a non-preemptive policy's running jobs first): those
    // of a team within its quota that fit within the team's share are guaranteed, the rest borrow.
    // Classes, best first: 0 guaranteed (for a non-preemptive policy: 0 running, 1 waiting),
    // 2 borrowing and running, 3 guaranteed but waiting for less than the grace (strict level),
    // 4 borrowing and waiting (5 likewise). A job ranked ahead of a running one may take its
    // devices, so a guaranteed job reclaims lent devices only once it has waited the grace; before
    // that it still goes first on free ones. Under a preemptive policy, outside the strict level,
    // borrowing jobs waiting share class 2 with those running: everything not guaranteed is
    // scheduled by the policy's order alone, as it would be without teams. (The strict level keeps
    // borrowers from preempting each other: every team's backlog is guaranteed there, and letting
    // the rest reshuffle measured worse.)
    std::sort(ranked_.begin(), ranked_.end());
    used_.assign(share_.size(), 0);
    borrowing_.clear();
    for (Ranked& r : ranked_) {
      const Job& j = *r.job;
      const int t = team_of(j);
      if (within_quota(t) && used_[t] + j.spec.gpus <= share_[t]) {
        used_[t] += j.spec.gpus;
        if (j.status == JobStatus::kWaiting && j.queued_since + opt_.grace > s.now) {
          r.k0 = 3;
          reclaim_at_ = std::min(reclaim_at_, j.queued_since + opt_.grace);
        }
      } else if (j.status == JobStatus::kRunning) {
        r.k0 = 2;
        borrowing_.push_back(j.id);
      } else {
        r.k0 += strict_ || !preemptive ? 4 : 2;
      }
    }
    Decision d = list_schedule(s, ranked_, {.preemptive = true, .defrag = opt_.defrag});
    std::sort(borrowing_.begin(), borrowing_.end());
    for (JobId id : d.preempt)
      ++(std::binary_search(borrowing_.begin(), borrowing_.end(), id) ? reclaims_ : within_team_);
    return d;
  }

  double next_wakeup(const SchedState& s) const override {
    double t = inner_->next_wakeup(s);
    if (reclaim_at_ > s.now) t = std::min(t, reclaim_at_);
    if (!strict_ && !s.waiting.empty()) t = std::min(t, quota_changes());
    return t;
  }
  void job_finished(const Job& j) override { inner_->job_finished(j); }
  void forget(JobId id) override { inner_->forget(id); }
  std::map<std::string, double> counters() const override {
    std::map<std::string, double> c = inner_->counters();
    c["borrowed_preempted"] = static_cast<double>(reclaims_);
    c["guaranteed_preempted"] = static_cast<double>(within_team_);
    return c;
  }

 private:
  // Each team's devices asked for (running and waiting jobs), averaged exponentially over the
  // horizon: a weighted sum and the sum of the weights, so that a short history is not read as
  // a small demand. The interval since the last decision had the demand that decision saw.
  void average_demand(const SchedState& s) {
    const size_t n = share_.size();
    if (asked_.empty()) asked_.assign(n, 0.0), average_.assign(n, 0.0);
    if (last_ >= 0 && s.now > last_) {
      const double keep = std::exp(-(s.now - last_) / opt_.horizon);
      for (size_t t = 0; t < n; ++t) average_[t] = average_[t] * keep + asked_[t] * (1 - keep);
      weight_ = weight_ * keep + (1 - keep);
    }
    last_ = s.now;
    std::fill(asked_.begin(), asked_.end(), 0.0);
    for (const Job* j : s.running) asked_[team_of(*j)] += j->spec.gpus;
    for (const Job* j : s.waiting) asked_[team_of(*j)] += j->spec.gpus;
  }
  bool within_quota(int t) const { return strict_ || average_[t] <= share_[t] * weight_; }
  // The first time a team crosses its quota if the devices its jobs ask for stay as they are:
  // after d seconds, with k = exp(-d / horizon), it is within its quota while
  // average k + asked (1 - k) <= share (weight k + 1 - k), so the crossing is at
  // k = (share - asked) / (average - share weight - asked + share), when that lies in (0, 1).
  // A team's precedence changes there although no job arrives or ends (a quiet daemon).
  double quota_changes() const {
    double first = kInf;
    if (asked_.empty()) return first;  // no decision yet
    for (size_t t = 0; t < share_.size(); ++t) {
      const double S = share_[t], A = asked_[t], c = average_[t] - S * weight_ - A + S;
      if (S <= 0 || c == 0) continue;
      const double k = (S - A) / c;
      if (k > 0 && k < 1) first = std::min(first, last_ - opt_.horizon * std::log(k));
    }
    return first;
  }

  int team_of(const Job& j) const {
    auto it = index_.find(j.spec.queue);
    if (it != index_.end()) return it->second;
    std::string known;
    for (const auto& [t, n] : shares_) known += (known.empty() ? "" : ", ") + t;
    EMBER_FAIL("policy '", name(), "': job '", j.spec.name, "' belongs to team '", j.spec.queue,
               "', which has no share (teams: ", known, ")");
  }

  std::unique_ptr<Policy> inner_;
  RankingPolicy* ranking_;
  Shares shares_;
  QuotaOptions opt_;
  std::unordered_map<std::string, int> index_;
  std::vector<int> share_, used_;
  std::vector<Ranked> ranked_;
  std::vector<JobId> borrowing_;
  long reclaims_ = 0, within_team_ = 0;
  double reclaim_at_ = kInf;  // when the first guaranteed job's grace ends
  std::vector<double> asked_, average_;
  double weight_ = 0, last_ = -1;
  bool strict_;
};

}  // namespace

QuotaOptions quota_options(const PolicyParams& params) {
  ParamReader r("quota", params);
  QuotaOptions o;
  o.grace = r.number("grace", o.grace, 0, 1e9);
  o.defrag = r.number("defrag", o.defrag, 0, 16);
  o.horizon = r.number("horizon", o.horizon, 1, 1e9);
  o.strict = r.number("strict", o.strict, 0, 1);
  r.finish();
  EMBER_CHECK(o.strict <= 0 || o.strict == 1, "quota.strict=", o.strict,
              ": expected 0 (guarantees within quotas) or 1 (every team's guarantee at all times)");
  return o;
}

std::unique_ptr<Policy> make_team_quotas(std::unique_ptr<Policy> inner, Shares shares, QuotaOptions opt) {
  EMBER_CHECK(inner != nullptr, "team quotas: no policy to run inside the teams");
  auto* ranking = dynamic_cast<RankingPolicy*>(inner.get());
  if (ranking == nullptr) {
    std::string ones;
    for (const std::string& n : ranking_policy_names()) ones += (ones.empty() ? "" : ", ") + n;
    EMBER_FAIL("policy '", inner->name(),
               "' cannot run inside team quotas: it does not rank jobs (the ones that do: ", ones, ")");
  }
  EMBER_CHECK(!shares.empty(), "team quotas: no teams");
  for (const auto& [t, n] : shares)
    EMBER_CHECK(n >= 0, "team quotas: team '", t, "' has share ", n, "; expected >= 0 devices");
  EMBER_CHECK(opt.grace >= 0 && opt.defrag >= 0, "team quotas: grace and defrag must be >= 0, got ", opt.grace, " and ",
              opt.defrag);
  EMBER_CHECK(opt.horizon > 0, "team quotas: expected a demand horizon > 0 seconds, got ", opt.horizon);
  EMBER_CHECK(opt.strict == -1 || opt.strict == 0 || opt.strict == 1,
              "team quotas: expected strict -1 (by the policy), 0 or 1, got ", opt.strict);
  auto quotas = std::make_unique<TeamQuotas>(std::move(inner), ranking, std::move(shares), opt);
  EMBER_CHECK(opt.grace == 0 || quotas->strict(), "quota.grace=", opt.grace, ": policy '", quotas->name(),
              "' runs within quotas, where a team's guarantee already gives way while it asks for more than its "
              "share; a grace before reclaiming goes with the strict level (quota.strict=1)");
  return quotas;
}

}  // namespace ember::sched
