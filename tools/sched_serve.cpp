// `ember sched serve`: the live scheduler daemon (scheduler/daemon/daemon.h) on this machine's
// devices.
#include <iostream>

#include "core/error.h"
#include "core/parallel.h"
#include "scheduler/daemon/daemon.h"
#include "scheduler/teams.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {

namespace {

// The flags of `ember sched serve`, with their help.
Flags serve_flags() {
  Flags f;
  f.add("state", "DIR", "folder for the socket, the SQLite state and the job logs (created if missing)")
      .add("devices", "SPEC",
           "auto (GPUs, else one CPU device per core), gpu, gpu:0,1,..., cpu:N, cpu:NxC (N devices of C cores) or "
           "cpu:N@TYPE,M@TYPE,... (N devices of type TYPE, M of another: a pool of device types, see --speeds)")
      .add("backend", "B",
           "local (run jobs on this machine's --devices, default) or slurm (Slurm runs them on its nodes; "
           "docs/scheduler/slurm.md)")
      .add("partition", "P", "--backend slurm: the Slurm partition whose nodes are the pool (default: Slurm's default)")
      .add("cpu-mem", "GIB", "memory each CPU device offers, checked against memory_gib (default 0: any)")
      .add("policy", "P", "scheduling policy (default fcfs; see `ember sched simulate --help`)")
      .add("set", "POLICY.KEY=V", "policy parameter (repeatable)", true)
      .add("grace", "S", "seconds between SIGTERM and SIGKILL when stopping a job (default 30)")
      .add("elastic-restart", "S",
           "seconds an elastic job's resize costs, amortised over its life by the goodput allocator (default 10)")
      .add("preempt-cost", "S",
           "seconds a preemption is expected to cost the preempted job, told to the policy (default 0; as in "
           "`ember sched simulate`)")
      .add("max-queued", "N", "refuse submissions while N jobs are queued (default 1000)")
      .add("config", "FILE",
           "groups and per-user limits (proto/daemon_config.proto, text format; docs/scheduler/daemon.md, Security)")
      .add("quota", "FILE",
           "team quotas: 'TEAM DEVICES' lines; the policy runs inside the teams, idle shares are lent and reclaimed "
           "through checkpoints, jobs of other teams are refused (docs/scheduler/teams.md)")
      .add("admit-target", "S",
           "refuse a submission whose estimated start delay is over S seconds, telling when to resubmit (default: "
           "admit all; every submission is still told its estimate)")
      .add("speeds", "FILE",
           "with typed devices (--devices cpu:N@TYPE,...): speeds per model and type, CSV 'model,TYPE,...' "
           "(default: the built-in table)")
      .add("http", "HOST:PORT",
           "serve Prometheus metrics at /metrics and a live dashboard at / on this address, e.g. 127.0.0.1:9100 "
           "(PORT 0: any free port, printed at start; default: none; docs/scheduler/operators.md)")
      .add("http-allow-remote", "",
           "let --http listen on an address other than loopback (the page shows every job's name, team and owner)")
      .add("quiet", "", "do not print events")
      .add("help", "", "show this help");
  return f;
}

}  // namespace

int sched_serve(const std::vector<std::string>& args) {
  Flags f = serve_flags();
  const std::string usage = usage_of("ember sched serve --state DIR [--devices SPEC] [--policy P] [flags]", f);
  return run_leaf("ember sched serve", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    sched::DaemonOptions o;
    o.state_dir = f.require("state");
    o.devices = f.str("devices", "auto");
    o.backend = f.str("backend", "local");
    if (o.backend != "local" && o.backend != "slurm")
      throw UsageError("--backend: expected local or slurm, got '" + o.backend + "'");
    o.partition = f.str("partition", "");
    if (o.backend == "slurm" && f.has("devices"))
      throw UsageError("--devices: the pool of --backend slurm is the Slurm partition's nodes (--partition)");
    o.cpu_memory_gib = f.number("cpu-mem", 0, 0, 1e9);
    o.policy = f.str("policy", "fcfs");
    set_num_threads(1);  // the daemon's own work is one thread (its jobs are other processes)
    for (const std::string& kv : f.all("set")) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError("--set: expected POLICY.KEY=VALUE, got '" + kv + "'");
      o.params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    o.grace_s = f.number("grace", 30, 0, 86400);
    o.preempt_cost = f.number("preempt-cost", 0, 0, 1e9);
    o.elastic_restart_s = f.number("elastic-restart", 10, 0, 1e9);
    o.max_queued = static_cast<int>(f.integer("max-queued", 1000, 1, 10000000));
    o.quiet = f.has("quiet");
    o.config = f.str("config", "");
    o.quota = f.str("quota", "");
    o.speeds = f.str("speeds", "");
    o.admit_target = f.has("admit-target") ? f.number("admit-target", 0, 0, 1e12) : -1;
    o.http = f.str("http", "");
    o.http_allow_remote = f.has("http-allow-remote");
    if (o.http_allow_remote && o.http.empty()) throw UsageError("--http-allow-remote: give --http HOST:PORT too");
    try {
      auto p = sched::make_policy(o.policy, o.params);
      if (!o.quota.empty()) sched::make_team_quotas(std::move(p), {{"", 0}}, sched::quota_options(o.params));
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    for (const auto& [k, v] : o.params)
      if (k.starts_with("quota.") && o.quota.empty())
        throw UsageError("--set " + k + ": the team level runs only with --quota");
    return sched::serve(o);
  });
}

}  // namespace ember::tools
