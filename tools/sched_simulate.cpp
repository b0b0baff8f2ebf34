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

namespace ember::cli {
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

}  // namespace

int sched_simulate(const std::vector<std::string>& args) {
  Flags f;
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
  const std::string usage = usage_of("ember sched simulate --trace FILE --gpus N (--policy P | --compare) [flags]", f) +
                            "\npolicies: " + join(policy_names()) +
                            ", learned (the shipped network), learned:FILE (aliases: " + join(policy_aliases()) + ")\n";
  return run_leaf("ember sched simulate", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    const std::string trace_path = f.require("trace");
    if (!f.has("gpus")) throw UsageError("--gpus is required");
    const bool typed = f.str("gpus").find(':') != std::string::npos;
    std::vector<sched::DeviceType> types;
    std::vector<long> sizes;
    if (typed) {
      try {
        types = Topology::parse_types(f.str("gpus"));
      } catch (const ember::Error& e) {
        throw UsageError(std::string("--gpus: ") + e.what());
      }
      long total = 0;
      for (const sched::DeviceType& t : types) total += t.count;
      sizes.push_back(total);
    } else {
      sizes = f.integers("gpus", 1, 10'000'000);
      if (f.has("speeds")) throw UsageError("--speeds goes with device types in --gpus (TYPE:N,...)");
    }
    if (f.has("policy") == f.has("compare")) throw UsageError("give exactly one of --policy and --compare");
    const std::string source = f.str("estimates", "trace");
    if (source != "trace" && source != "predicted")
      throw UsageError("--estimates: expected trace or predicted, got '" + source + "'");
    const std::string predictor_name = f.str("predictor", "history");
    {
      const std::vector<std::string> known = predictor_names();
      if (std::find(known.begin(), known.end(), predictor_name) == known.end()) {
        std::string names;
        for (const std::string& k : known) names += (names.empty() ? "" : " or ") + k;
        throw UsageError("--predictor: expected " + names + ", got '" + predictor_name + "'");
      }
    }
    const bool admission = f.has("admit-target");
    AdmissionOptions admit_opt;
    admit_opt.target = f.number("admit-target", 3600, 0, 1e12);
    const std::string admit_mode = f.str("admit-mode", "defer");
    if (admit_mode != "defer" && admit_mode != "refuse")
      throw UsageError("--admit-mode: expected defer or refuse, got '" + admit_mode + "'");
    admit_opt.refuse = admit_mode == "refuse";
    admit_opt.max_defers = static_cast<int>(f.integer("admit-defers", 3, 0, 1000));
    if (!admission && (f.has("admit-mode") || f.has("admit-defers")))
      throw UsageError("--admit-mode and --admit-defers go with --admit-target");
    const bool quotas = f.has("quota");
    const std::string quota_source = f.str("quota", "");
    const bool min_gang = f.str("min-share", "gang") == "gang";
    const long min_share = min_gang ? 0 : f.integer("min-share", 1, 0, 1'000'000);
    if (f.has("min-share") && quota_source != "auto") throw UsageError("--min-share goes with --quota auto");
    const double guarantee = f.number("guarantee", 1, 0.01, 1);
    if (f.has("guarantee") && quota_source != "auto") throw UsageError("--guarantee goes with --quota auto");
    std::vector<std::string> names =
        f.has("compare") ? compare_runs(source == "predicted", quotas, typed) : split_commas(f.str("policy"));
    if (f.has("with")) {
      if (!f.has("compare")) throw UsageError("--with adds runs to --compare; list them in --policy otherwise");
      for (const std::string& n : split_commas(f.str("with")))  // a run --compare has already is run once
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
    for (const std::string& n : names) {
      if (!known_policy(inner_policy(n)))
        throw UsageError("--policy: unknown policy '" + inner_policy(n) + "': expected one of " + join(policy_names()) +
                         " (a name may end in " + kQuotaSuffix + ", " + kPredSuffix + " or both, in that order)");
      if (quota_run(n) && !quotas) throw UsageError("--policy " + n + ": runs inside team quotas, which need --quota");
    }
    const double preempt_cost = f.number("preempt-cost", 0, 0, 1e12);
    const double stop_delay = f.number("stop-delay", 0, 0, 1e9);
    const double restart_delay = f.number("restart-delay", 0, 0, 1e9);
    const double start_delay = f.number("start-delay", 0, 0, 1e9);
    const double checkpoint_interval = f.number("checkpoint-interval", 0, 0, 1e12);
    const long node_gpus = f.integer("node-gpus", 8, 0, 10'000'000);
    const double gpu_mem = f.number("gpu-mem", 0, 0, 1e9);
    TraceOptions topt;
    if (f.has("columns")) {
      try {
        topt.columns = ColumnMap::parse(f.str("columns"));
      } catch (const ember::Error& e) {
        throw UsageError(e.what());
      }
    }
    const std::string unit = f.str("time-unit", "s");
    if (unit == "s")
      topt.time_unit = 1;
    else if (unit == "ms")
      topt.time_unit = 1e-3;
    else if (unit == "min")
      topt.time_unit = 60;
    else if (unit == "h")
      topt.time_unit = 3600;
    else
      throw UsageError("--time-unit: expected s, ms, min or h, got '" + unit + "'");
    topt.exact_estimates = !f.has("no-estimates");
    PolicyParams params;
    for (const std::string& kv : f.all("set")) {
      size_t eq = kv.find('='), dot = kv.find('.');
      if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || eq + 1 == kv.size())
        throw UsageError("--set: expected POLICY.KEY=VALUE, got '" + kv + "'");
      if (!known_policy(kv.substr(0, dot)) && kv.substr(0, dot) != "history" && kv.substr(0, dot) != "quantile" &&
          kv.substr(0, dot) != "quota")
        throw UsageError("--set " + kv + ": unknown policy '" + kv.substr(0, dot) +
                         "' (or a predictor, history or quantile, or the team level, quota)");
      params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : params)
      if (k.starts_with("quantile.") && predictor_name != "quantile")
        throw UsageError("--set " + k + ": quantile.* parameters go with --predictor quantile");
    for (const auto& [k, v] : params)
      if (k.starts_with("quota.") && !quotas)
        throw UsageError("--set " + k + ": the team level runs only with --quota");
    // Build every policy once up front so that a bad parameter fails before any long run. Under
    // --estimates predicted, the ones that read durations get predictions (only they have
    // anything to predict).
    for (std::string& n : names) {
      try {
        std::unique_ptr<Policy> p = make_policy(inner_policy(n), params);
        const bool clairvoyant = p->traits().clairvoyant;
        if (quota_run(n)) make_team_quotas(std::move(p), Shares{{"", 0}}, quota_options(params));  // checks it ranks
        if (source == "predicted" && !predicted_run(n) && clairvoyant) n += kPredSuffix;
        if (predicted_run(n)) make_predictor(predictor_name, params);
      } catch (const ember::Error& e) {
        throw UsageError(e.what());
      }
    }

    std::vector<JobSpec> trace = read_trace(trace_path, topt);
    const SpeedTable speeds = typed && f.has("speeds") ? SpeedTable::read(f.str("speeds")) : SpeedTable::defaults();
    if (typed) speeds.assign_models(trace);
    // The team shares for a cluster of `n` devices.
    auto shares_for = [&](int n) -> Shares {
      Shares s;
      if (quota_source == "auto") {
        const std::map<std::string, double> demand = team_demand(trace);
        try {
          s = plan_shares(demand, static_cast<int>(std::floor(n * guarantee + 1e-9)),
                          min_gang ? widest_gangs(trace) : uniform_minimum(demand, static_cast<int>(min_share)));
        } catch (const ember::Error& e) {
          if (!min_gang) throw;
          throw ember::Error(std::string(e.what()) +
                             " (--min-share gang: each team's minimum is its widest gang; give --min-share N instead)");
        }
      } else {
        s = read_shares(quota_source, n);
        check_teams(trace, s, "quota file '" + quota_source + "'");
      }
      return s;
    };
    if (quotas) {
      for (long n : sizes) shares_for(static_cast<int>(n));  // fails before any long run
    }
    // The simulation is one thread; the learned policy's small matrix products only lose to
    // waking a thread team at every decision.
    set_num_threads(1);
    std::vector<SimResult> all;
    for (long n : sizes) {
      Topology topo = typed ? Topology::typed(types, static_cast<int>(node_gpus), gpu_mem)
                            : Topology::uniform(static_cast<int>(n), static_cast<int>(node_gpus), gpu_mem);
      if (typed) speeds.check_types(topo);
      std::cout << "trace " << trace_path << ": " << trace.size() << " jobs; " << n << " devices";
      if (typed) std::cout << " (" << f.str("gpus") << ")";
      std::cout << " in " << topo.num_nodes() << " node(s)";
      if (trace.back().submit > trace.front().submit)
        std::cout << "; offered load " << offered_load(trace, static_cast<int>(n)) << " over the arrival window";
      std::cout << "\n";
      const Shares shares = quotas ? shares_for(static_cast<int>(n)) : Shares{};
      auto run = [&](const std::vector<JobSpec>& jobs, const Topology& on, const std::string& name, bool admitting) {
        std::unique_ptr<Policy> p = make_policy(inner_policy(name), params);
        if (quota_run(name)) p = make_team_quotas(std::move(p), shares, quota_options(params));
        std::unique_ptr<DurationPredictor> predictor;
        SimOptions so;
        so.preempt_cost = preempt_cost;
        so.stop_delay = stop_delay;
        so.restart_delay = restart_delay;
        so.start_delay = start_delay;
        so.checkpoint_interval = checkpoint_interval;
        if (typed)
          so.speed = [&speeds, &on](const JobSpec& j, int t) { return speeds.speed(j.model, on.type_name(t)); };
        if (predicted_run(name)) so.predictor = (predictor = make_predictor(predictor_name, params)).get();
        std::unique_ptr<AdmissionControl> control;
        if (admitting) so.admission = (control = std::make_unique<AdmissionControl>(admit_opt, p.get())).get();
        SimResult r = simulate(jobs, on, *p, so);
        if (predicted_run(name)) r.policy += kPredSuffix;
        return r;
      };
      // Each team alone on its share, under the run's policy without the team level: what rho
      // compares with. A policy and its +quota run share these runs. On a cluster of device types
      // the share is a slice of each type in proportion (share_of_types).
      std::map<std::string, SimResult> alone_runs;
      std::vector<SimResult> rs;
      for (const std::string& name : names) {
        rs.push_back(run(trace, topo, name, admission));
        if (!quotas) continue;
        const std::string alone_name = inner_policy(name) + (predicted_run(name) ? kPredSuffix : "");
        rs.back().fairness = std::make_shared<Fairness>(
            measure_fairness(trace, rs.back(), shares, [&](const std::vector<JobSpec>& jobs, int gpus) {
              const std::string key = alone_name + "|" + jobs.front().queue + "|" + std::to_string(gpus);
              auto it = alone_runs.find(key);
              if (it == alone_runs.end())
                it = alone_runs
                         .emplace(key, run(jobs,
                                           typed ? Topology::typed(share_of_types(types, gpus),
                                                                   static_cast<int>(node_gpus), gpu_mem)
                                                 : Topology::uniform(gpus, static_cast<int>(node_gpus), gpu_mem),
                                           alone_name, false))
                         .first;
              return it->second;
            }));
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
        if (quotas) std::cout << "\n" << format_teams(rs);
      }
      std::cout << "\n";
      for (SimResult& r : rs) all.push_back(std::move(r));
    }
    if (f.has("out")) write_file_atomic(f.str("out"), to_json(all));
    if (f.has("csv")) write_file_atomic(f.str("csv"), to_csv(all));
    if (f.has("svg")) {
      std::vector<SimResult> labelled = all;
      if (sizes.size() > 1)
        for (SimResult& r : labelled) r.policy.append("@").append(std::to_string(r.gpus));
      write_file_atomic(f.str("svg"), to_svg(labelled, "JCT distribution: " + trace_path));
    }
    return 0;
  });
}

}  // namespace ember::cli
