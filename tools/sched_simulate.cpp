// `ember sched simulate`: runs policies over a job trace on one or more cluster sizes and reports
// JCT, makespan, utilisation, queueing, preemptions and slowdown, optionally as JSON, CSV and an
// SVG of the JCT distributions.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/parallel.h"
#include "scheduler/admission.h"
#include "scheduler/learned/learned_policy.h"
#include "scheduler/predict.h"
#include "scheduler/registry.h"
#include "scheduler/sim/fairness.h"
#include "scheduler/sim/report.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/trace.h"
#include "scheduler/sim/trace_gen.h"
#include "scheduler/speeds.h"
#include "scheduler/teams.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
namespace {

using namespace ember::sched;

std::string join(const std::vector<std::string>& v) {
  std::string o;
  for (const std::string& s : v) o += (o.empty() ? "" : ", ") + s;
  return o;
}

bool predicted_run(const std::string& n) {
  return n.ends_with(kPredSuffix);
}
// The run's name less +pred: what the results call the policy before the suffix is added back.
std::string base_policy(const std::string& n) {
  return predicted_run(n) ? n.substr(0, n.size() - std::string(kPredSuffix).size()) : n;
}
bool quota_run(const std::string& n) {
  return base_policy(n).ends_with(kQuotaSuffix);
}
// The registered policy a run builds: the name less +pred and +quota.
std::string inner_policy(const std::string& n) {
  const std::string b = base_policy(n);
  return quota_run(n) ? b.substr(0, b.size() - std::string(kQuotaSuffix).size()) : b;
}

// The command's flags.
void add_flags(Flags& f) {
  f.add("trace", "FILE", "job trace (CSV, see docs/scheduler/simulator.md)")
      .add("gpus", "N[,N...]|TYPE:N,...",
           "devices in the cluster, several sizes run one after the other; or one cluster of several device "
           "types, e.g. h200:64,a100:128,v100:128 (speeds from --speeds)")
      .add("speeds", "FILE",
           "with device types: speeds per model and type, CSV 'model,TYPE,...' (default: the built-in table, "
           "docs/scheduler/heterogeneous.md); jobs without a model column get one of its models by a hash of "
           "their name")
      .add("policy", "P[,P...]", "policy or policies to run")
      .add("compare", "", "run every policy; the table shows each metric's ratio to fcfs")
      .add("with", "P[,P...]", "more runs for --compare, e.g. learned:FILE")
      .add("preempt-cost", "S", "seconds of work lost or repeated per preemption (default 0)")
      .add("stop-delay", "S", "seconds a preempted job keeps its devices while it checkpoints and exits (default 0)")
      .add("restart-delay", "S", "seconds of work each restart after a preemption costs: restore (default 0)")
      .add("start-delay", "S", "seconds every start costs before the work begins: launching the job (default 0)")
      .add("checkpoint-interval", "S",
           "seconds of work between checkpoints; a preemption loses the work since the last (default 0: "
           "jobs checkpoint when stopped)")
      .add("node-gpus", "K", "devices per node; a gang spans as few nodes as possible (default 8, 0: one flat pool)")
      .add("gpu-mem", "GIB", "memory of every device, checked against a mem_per_gpu column (default 0: unlimited)")
      .add("columns", "MAP",
           "column names for other CSVs: field=column,... (fields: id, submit, gpus, duration, "
           "estimate, priority, queue, mem, model)")
      .add("time-unit", "U", "unit of the trace's times: s, ms, min or h (default s)")
      .add("no-estimates", "", "without an estimate column, give jobs no estimate (default: the true duration)")
      .add("estimates", "SOURCE",
           "trace (default: the trace's estimates, else its durations) or predicted (every policy that uses "
           "durations gets a prediction from finished jobs instead; a name ending in +pred does that for one)")
      .add("predictor", "NAME",
           "what predicts durations for +pred runs: history (default: recent run times of the job's queue and "
           "gang size) or quantile (a quantile regressor over those statistics, trained with Ember on the jobs "
           "finished so far, refitted as the trace runs)")
      .add("quota", "FILE|auto",
           "team quotas: a file of 'TEAM DEVICES' lines, or auto (shares planned from the trace's own demand by "
           "a linear program); runs named P+quota run policy P inside the teams, and every run reports "
           "fairness between teams")
      .add("guarantee", "F",
           "with --quota auto: the fraction of the cluster planned as guaranteed shares (default 1); the rest "
           "is nobody's and goes by the policy's order alone")
      .add("min-share", "N|gang",
           "with --quota auto: devices every team is guaranteed at least, or gang: each team's widest gang, so "
           "that every job can be guaranteed (default gang)")
      .add("admit-target", "S",
           "admission control: each arrival gets a start-delay estimate; jobs over S seconds are deferred (told "
           "when to resubmit) or refused, and the table reports the estimates' errors and the SLO attainment")
      .add("admit-mode", "M", "with --admit-target: defer (default; refused after --admit-defers) or refuse")
      .add("admit-defers", "N", "with --admit-target: deferrals before a job is refused (default 3)")
      .add("set", "POLICY.KEY=V", "policy parameter, e.g. las.thresholds=3600,36000 (repeatable)", true)
      .add("out", "FILE.json", "write the results as a JSON list")
      .add("csv", "FILE", "write the results table as CSV")
      .add("svg", "FILE", "write the JCT distributions (CDFs) as SVG")
      .add("help", "", "show this help");
}

// What the command line asks for, checked before any long run.
struct Request {
  std::string trace_path;
  bool typed = false;
  std::vector<sched::DeviceType> types;
  std::vector<long> sizes;
  std::string source, predictor_name;
  bool admission = false;
  AdmissionOptions admit_opt;
  bool quotas = false, min_gang = true;
  std::string quota_source;
  long min_share = 0;
  double guarantee = 1;
  std::vector<std::string> names;  // the runs
  double preempt_cost = 0, stop_delay = 0, restart_delay = 0, start_delay = 0, checkpoint_interval = 0;
  long node_gpus = 8;
  double gpu_mem = 0;
  TraceOptions topt;
  PolicyParams params;
};

void parse_cluster(Flags& f, Request& q) {
  q.trace_path = f.require("trace");
  if (!f.has("gpus")) throw UsageError("--gpus is required");
  q.typed = f.str("gpus").find(':') != std::string::npos;
  if (q.typed) {
    try {
      q.types = Topology::parse_types(f.str("gpus"));
    } catch (const ember::Error& e) {
      throw UsageError(std::string("--gpus: ") + e.what());
    }
    long total = 0;
    for (const sched::DeviceType& t : q.types) total += t.count;
    q.sizes.push_back(total);
  } else {
    q.sizes = f.integers("gpus", 1, 10'000'000);
    if (f.has("speeds")) throw UsageError("--speeds goes with device types in --gpus (TYPE:N,...)");
  }
  if (f.has("policy") == f.has("compare")) throw UsageError("give exactly one of --policy and --compare");
}

void parse_estimates(Flags& f, Request& q) {
  q.source = f.str("estimates", "trace");
  if (q.source != "trace" && q.source != "predicted")
    throw UsageError("--estimates: expected trace or predicted, got '" + q.source + "'");
  q.predictor_name = f.str("predictor", "history");
  const std::vector<std::string> known = predictor_names();
  if (std::find(known.begin(), known.end(), q.predictor_name) == known.end()) {
    std::string names;
    for (const std::string& k : known) names += (names.empty() ? "" : " or ") + k;
    throw UsageError("--predictor: expected " + names + ", got '" + q.predictor_name + "'");
  }
}

void parse_admission(Flags& f, Request& q) {
  q.admission = f.has("admit-target");
  q.admit_opt.target = f.number("admit-target", 3600, 0, 1e12);
  const std::string admit_mode = f.str("admit-mode", "defer");
  if (admit_mode != "defer" && admit_mode != "refuse")
    throw UsageError("--admit-mode: expected defer or refuse, got '" + admit_mode + "'");
  q.admit_opt.refuse = admit_mode == "refuse";
  q.admit_opt.max_defers = static_cast<int>(f.integer("admit-defers", 3, 0, 1000));
  if (!q.admission && (f.has("admit-mode") || f.has("admit-defers")))
    throw UsageError("--admit-mode and --admit-defers go with --admit-target");
}

void parse_quotas(Flags& f, Request& q) {
  q.quotas = f.has("quota");
  q.quota_source = f.str("quota", "");
  q.min_gang = f.str("min-share", "gang") == "gang";
  q.min_share = q.min_gang ? 0 : f.integer("min-share", 1, 0, 1'000'000);
  if (f.has("min-share") && q.quota_source != "auto") throw UsageError("--min-share goes with --quota auto");
  q.guarantee = f.number("guarantee", 1, 0.01, 1);
  if (f.has("guarantee") && q.quota_source != "auto") throw UsageError("--guarantee goes with --quota auto");
}

void parse_runs(Flags& f, Request& q) {
  q.names = f.has("compare") ? compare_runs(q.source == "predicted", q.quotas, q.typed) : split_commas(f.str("policy"));
  if (f.has("with")) {
    if (!f.has("compare")) throw UsageError("--with adds runs to --compare; list them in --policy otherwise");
    for (const std::string& n : split_commas(f.str("with")))  // a run --compare has already is run once
      if (std::find(q.names.begin(), q.names.end(), n) == q.names.end()) q.names.push_back(n);
  }
  for (const std::string& n : q.names) {
    if (!known_policy(inner_policy(n)))
      throw UsageError("--policy: unknown policy '" + inner_policy(n) + "': expected one of " + join(policy_names()) +
                       " (a name may end in " + kQuotaSuffix + ", " + kPredSuffix + " or both, in that order)");
    if (quota_run(n) && !q.quotas) throw UsageError("--policy " + n + ": runs inside team quotas, which need --quota");
  }
}

void parse_costs(Flags& f, Request& q) {
  q.preempt_cost = f.number("preempt-cost", 0, 0, 1e12);
  q.stop_delay = f.number("stop-delay", 0, 0, 1e9);
  q.restart_delay = f.number("restart-delay", 0, 0, 1e9);
  q.start_delay = f.number("start-delay", 0, 0, 1e9);
  q.checkpoint_interval = f.number("checkpoint-interval", 0, 0, 1e12);
  q.node_gpus = f.integer("node-gpus", 8, 0, 10'000'000);
  q.gpu_mem = f.number("gpu-mem", 0, 0, 1e9);
}

void parse_trace_options(Flags& f, Request& q) {
  if (f.has("columns")) {
    try {
      q.topt.columns = ColumnMap::parse(f.str("columns"));
    } catch (const ember::Error& e) {
      throw UsageError(e.what());
    }
  }
  const std::string unit = f.str("time-unit", "s");
  if (unit == "s")
    q.topt.time_unit = 1;
  else if (unit == "ms")
    q.topt.time_unit = 1e-3;
  else if (unit == "min")
    q.topt.time_unit = 60;
  else if (unit == "h")
    q.topt.time_unit = 3600;
  else
    throw UsageError("--time-unit: expected s, ms, min or h, got '" + unit + "'");
  q.topt.exact_estimates = !f.has("no-estimates");
}

void parse_params(Flags& f, Request& q) {
  for (const std::string& kv : f.all("set")) {
    size_t eq = kv.find('='), dot = kv.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || eq + 1 == kv.size())
      throw UsageError("--set: expected POLICY.KEY=VALUE, got '" + kv + "'");
    if (!known_policy(kv.substr(0, dot)) && kv.substr(0, dot) != "history" && kv.substr(0, dot) != "quantile" &&
        kv.substr(0, dot) != "quota")
      throw UsageError("--set " + kv + ": unknown policy '" + kv.substr(0, dot) +
                       "' (or a predictor, history or quantile, or the team level, quota)");
    q.params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : q.params)
    if (k.starts_with("quantile.") && q.predictor_name != "quantile")
      throw UsageError("--set " + k + ": quantile.* parameters go with --predictor quantile");
  for (const auto& [k, v] : q.params)
    if (k.starts_with("quota.") && !q.quotas)
      throw UsageError("--set " + k + ": the team level runs only with --quota");
  // Admission predicts run times with the history predictor the runs would use (history.prior
  // included, which is also its mean service time before any job has finished).
  try {
    q.admit_opt.predictor = history_options(q.params);
  } catch (const ember::Error& e) {
    throw UsageError(e.what());
  }
}

// Builds every policy once up front so that a bad parameter fails before any long run. Under
// --estimates predicted, the ones that read durations get predictions (only they have anything
// to predict). A learned run reads its network from a file: a missing or foreign file is bad
// input (status 1, no usage), so its policy is built outside the usage-error translation.
void build_runs_once(Request& q) {
  for (std::string& n : q.names) {
    std::unique_ptr<Policy> p;
    if (is_learned_policy(inner_policy(n))) p = make_policy(inner_policy(n), q.params);
    try {
      if (!p) p = make_policy(inner_policy(n), q.params);
      const bool clairvoyant = p->traits().clairvoyant;
      if (quota_run(n)) make_team_quotas(std::move(p), Shares{{"", 0}}, quota_options(q.params));  // checks it ranks
      if (q.source == "predicted" && !predicted_run(n) && clairvoyant) n += kPredSuffix;
      if (predicted_run(n)) make_predictor(q.predictor_name, q.params);
    } catch (const ember::Error& e) {
      throw UsageError(e.what());
    }
  }
}

Request parse_request(Flags& f) {
  Request q;
  parse_cluster(f, q);
  parse_estimates(f, q);
  parse_admission(f, q);
  parse_quotas(f, q);
  parse_runs(f, q);
  parse_costs(f, q);
  parse_trace_options(f, q);
  parse_params(f, q);
  build_runs_once(q);
  return q;
}

// The runs a Request asks for, on its trace, one cluster size after the other.
class Runs {
 public:
  Runs(Flags& f, const Request& q)
      : f_(f),
        q_(q),
        trace_(read_trace(q.trace_path, q.topt)),
        speeds_(q.typed && f.has("speeds") ? SpeedTable::read(f.str("speeds")) : SpeedTable::defaults()) {
    if (q.typed) speeds_.assign_models(trace_);
  }
  int main();

 private:
  Shares shares_for(int n) const;
  SimResult run(const std::vector<JobSpec>& jobs, const Topology& on, const std::string& name, bool admitting,
                const Shares& shares) const;
  std::vector<SimResult> run_size(long n);
  void measure(SimResult& r, const std::string& name, const Shares& shares);
  Topology topology(long n) const {
    return q_.typed ? Topology::typed(q_.types, static_cast<int>(q_.node_gpus), q_.gpu_mem)
                    : Topology::uniform(static_cast<int>(n), static_cast<int>(q_.node_gpus), q_.gpu_mem);
  }
  void write(const std::vector<SimResult>& all) const;

  Flags& f_;
  const Request& q_;
  std::vector<JobSpec> trace_;
  const SpeedTable speeds_;
  // Each team alone on its share, by policy, team and share: what rho compares with.
  std::map<std::string, SimResult> alone_runs_;
};

// The team shares for a cluster of `n` devices.
Shares Runs::shares_for(int n) const {
  Shares s;
  if (q_.quota_source == "auto") {
    const std::map<std::string, double> demand = team_demand(trace_);
    try {
      s = plan_shares(demand, static_cast<int>(std::floor(n * q_.guarantee + 1e-9)),
                      q_.min_gang ? widest_gangs(trace_) : uniform_minimum(demand, static_cast<int>(q_.min_share)));
    } catch (const ember::Error& e) {
      if (!q_.min_gang) throw;
      throw ember::Error(std::string(e.what()) +
                         " (--min-share gang: each team's minimum is its widest gang; give --min-share N instead)");
    }
  } else {
    s = read_shares(q_.quota_source, n);
    check_teams(trace_, s, "quota file '" + q_.quota_source + "'");
  }
  return s;
}

SimResult Runs::run(const std::vector<JobSpec>& jobs, const Topology& on, const std::string& name, bool admitting,
                    const Shares& shares) const {
  std::unique_ptr<Policy> p = make_policy(inner_policy(name), q_.params);
  if (quota_run(name)) p = make_team_quotas(std::move(p), shares, quota_options(q_.params));
  std::unique_ptr<DurationPredictor> predictor;
  SimOptions so;
  so.preempt_cost = q_.preempt_cost;
  so.stop_delay = q_.stop_delay;
  so.restart_delay = q_.restart_delay;
  so.start_delay = q_.start_delay;
  so.checkpoint_interval = q_.checkpoint_interval;
  if (q_.typed) so.speed = [this, &on](const JobSpec& j, int t) { return speeds_.speed(j.model, on.type_name(t)); };
  if (predicted_run(name)) so.predictor = (predictor = make_predictor(q_.predictor_name, q_.params)).get();
  std::unique_ptr<AdmissionControl> control;
  if (admitting) so.admission = (control = std::make_unique<AdmissionControl>(q_.admit_opt, p.get())).get();
  SimResult r = simulate(jobs, on, *p, so);
  if (predicted_run(name)) r.policy += kPredSuffix;
  return r;
}

// Fairness between teams for run `r`: each team alone on its share, under the run's policy
// without the team level. A policy and its +quota run share these runs. On a cluster of device
// types the share is a slice of each type in proportion (share_of_types).
void Runs::measure(SimResult& r, const std::string& name, const Shares& shares) {
  const std::string alone_name = inner_policy(name) + (predicted_run(name) ? kPredSuffix : "");
  r.fairness =
      std::make_shared<Fairness>(measure_fairness(trace_, r, shares, [&](const std::vector<JobSpec>& jobs, int gpus) {
        const std::string key = alone_name + "|" + jobs.front().queue + "|" + std::to_string(gpus);
        auto it = alone_runs_.find(key);
        if (it == alone_runs_.end())
          it = alone_runs_
                   .emplace(key, run(jobs,
                                     q_.typed ? Topology::typed(share_of_types(q_.types, gpus),
                                                                static_cast<int>(q_.node_gpus), q_.gpu_mem)
                                              : Topology::uniform(gpus, static_cast<int>(q_.node_gpus), q_.gpu_mem),
                                     alone_name, false, {}))
                   .first;
        return it->second;
      }));
}

std::vector<SimResult> Runs::run_size(long n) {
  Topology topo = topology(n);
  if (q_.typed) speeds_.check_types(topo);
  std::cout << "trace " << q_.trace_path << ": " << trace_.size() << " jobs; " << n << " devices";
  if (q_.typed) std::cout << " (" << f_.str("gpus") << ")";
  std::cout << " in " << topo.num_nodes() << " node(s)";
  if (trace_.back().submit > trace_.front().submit)
    std::cout << "; offered load " << offered_load(trace_, static_cast<int>(n)) << " over the arrival window";
  std::cout << "\n";
  const Shares shares = q_.quotas ? shares_for(static_cast<int>(n)) : Shares{};
  alone_runs_.clear();
  std::vector<SimResult> rs;
  for (const std::string& name : q_.names) {
    rs.push_back(run(trace_, topo, name, q_.admission, shares));
    if (q_.quotas) measure(rs.back(), name, shares);
  }
  if (rs.size() == 1) {
    std::cout << format_summary(rs[0]);
  } else {
    int base = -1, yardstick = -1;
    for (size_t i = 0; i < rs.size(); ++i) {
      if (rs[i].policy == "fcfs") base = static_cast<int>(i);
      if (rs[i].policy == "srsf") yardstick = static_cast<int>(i);
    }
    std::cout << format_table(rs, base, yardstick);
    if (q_.quotas) std::cout << "\n" << format_teams(rs);
  }
  std::cout << "\n";
  return rs;
}

void Runs::write(const std::vector<SimResult>& all) const {
  if (f_.has("out")) write_file_atomic(f_.str("out"), to_json(all));
  if (f_.has("csv")) write_file_atomic(f_.str("csv"), to_csv(all));
  if (f_.has("svg")) {
    std::vector<SimResult> labelled = all;
    if (q_.sizes.size() > 1)
      for (SimResult& r : labelled) r.policy.append("@").append(std::to_string(r.gpus));
    write_file_atomic(f_.str("svg"), to_svg(labelled, "JCT distribution: " + q_.trace_path));
  }
}

int Runs::main() {
  if (q_.quotas) {
    for (long n : q_.sizes) shares_for(static_cast<int>(n));  // fails before any long run
  }
  // The simulation is one thread; the learned policy's small matrix products only lose to
  // waking a thread team at every decision.
  set_num_threads(1);
  std::vector<SimResult> all;
  for (long n : q_.sizes)
    for (SimResult& r : run_size(n)) all.push_back(std::move(r));
  write(all);
  return 0;
}

}  // namespace

int sched_simulate(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--workload" || a.starts_with("--workload=")) return sched_simulate_elastic(args);
  Flags f;
  add_flags(f);
  const std::string usage = usage_of("ember sched simulate --trace FILE --gpus N (--policy P | --compare) [flags]", f) +
                            "\npolicies: " + join(policy_names()) +
                            ", learned (the shipped network), learned:FILE (aliases: " + join(policy_aliases()) + ")\n";
  return run_leaf("ember sched simulate", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    const Request q = parse_request(f);
    return Runs(f, q).main();
  });
}

}  // namespace ember::tools
