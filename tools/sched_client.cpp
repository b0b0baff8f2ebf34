// `ember sched submit|status|queue|cancel|logs|drain`: the clients of the daemon. Each sends one
// Request over the daemon's socket (scheduler/daemon/wire.h) and prints the Response.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "scheduler/admission.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/record.h"
#include "scheduler/daemon/wire.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
namespace {

using namespace ember::sched;

void add_state_flag(Flags& f) {
  f.add("state", "DIR", "the daemon's state folder (default: $EMBER_SCHED_STATE)").add("help", "", "show this help");
}

std::string state_dir(const Flags& f) {
  if (f.has("state")) return f.str("state");
  const char* e = std::getenv("EMBER_SCHED_STATE");
  if (e && *e) return e;
  throw UsageError("--state is required (or set EMBER_SCHED_STATE to the daemon's state folder)");
}

proto::Response call(const Flags& f, const proto::Request& req) {
  proto::Response r = call_daemon(state_dir(f), req);
  EMBER_CHECK(r.ok(), r.error());
  return r;
}

std::string fmt_seconds(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(s < 100 ? 1 : 0) << s;
  return o.str();
}

std::string devices_of(const proto::JobInfo& j) {
  std::string s;
  for (const std::string& d : j.device_names()) s += (s.empty() ? "" : ",") + d;
  return s.empty() ? "-" : s;
}

// What a job last reported ("epoch 2/5 step 40 loss 0.2500 1234.5/s"), or "-".
std::string progress_of(const proto::JobInfo& j) {
  if (!j.has_progress()) return "-";
  const proto::JobProgress& p = j.progress();
  std::ostringstream o;
  o << "epoch " << p.epoch();
  if (p.epochs() > 0) o << "/" << p.epochs();
  o << " step " << p.step() << std::fixed;
  if (p.has_loss()) o << " loss " << std::setprecision(4) << p.loss();
  if (p.has_samples_per_s()) o << " " << std::setprecision(1) << p.samples_per_s() << "/s";
  return o.str();
}

void print_jobs(const proto::Response& r) {
  std::cout << std::left << std::setw(5) << "ID" << std::setw(18) << "NAME" << std::setw(10) << "USER" << std::setw(10)
            << "STATE" << std::setw(6) << "DEVS" << std::setw(16) << "ON" << std::setw(9) << "RUN s" << std::setw(8)
            << "PREEMPT" << std::setw(9) << "RESTARTS" << std::setw(44) << "PROGRESS"
            << "REASON\n";
  for (const proto::JobInfo& j : r.jobs()) {
    std::string name = j.spec().name().empty() ? "-" : j.spec().name();
    std::string user = j.owner().empty() ? "-" : j.owner();
    std::cout << std::left << std::setw(5) << j.id() << std::setw(18) << name.substr(0, 17) << std::setw(10)
              << user.substr(0, 9) << std::setw(10) << state_name(j.state()) << std::setw(6) << spec_devices(j.spec())
              << std::setw(16) << devices_of(j) << std::setw(9) << fmt_seconds(j.run_seconds()) << std::setw(8)
              << j.preemptions() << std::setw(9) << j.restarts() << std::setw(44) << progress_of(j) << j.reason()
              << "\n";
  }
}

void print_teams(const proto::Response& r) {
  std::cout << std::left << std::setw(14) << "TEAM" << std::right << std::setw(6) << "SHARE" << std::setw(6) << "HELD"
            << std::setw(8) << "QUEUED" << std::setw(8) << "RUNNING" << std::setw(10) << "COMPLETED" << std::setw(12)
            << "AVG JCT s" << std::setw(10) << "SLOWDOWN" << std::setw(12) << "ALONE JCT s" << std::setw(8) << "RHO"
            << "\n";
  bool any = false;
  for (const proto::TeamInfo& t : r.teams()) {
    std::cout << std::left << std::setw(14) << t.name().substr(0, 13) << std::right << std::setw(6) << t.share()
              << std::setw(6) << t.devices_held() << std::setw(8) << t.queued() << std::setw(8) << t.running()
              << std::setw(10) << t.completed();
    if (t.completed() > 0) {
      any = true;
      std::cout << std::setw(12) << fmt_seconds(t.avg_jct_s()) << std::setw(10) << std::fixed << std::setprecision(2)
                << t.avg_slowdown() << std::setw(12) << fmt_seconds(t.alone_avg_jct_s()) << std::setw(8)
                << std::setprecision(3) << t.rho() << std::defaultfloat;
    } else {
      std::cout << std::setw(12) << "-" << std::setw(10) << "-" << std::setw(12) << "-" << std::setw(8) << "-";
    }
    std::cout << "\n";
  }
  if (any)
    std::cout << "max rho " << r.teams_max_rho() << ", Jain's index over the teams' rho " << r.teams_jain()
              << " (rho: average JCT over the same jobs' average JCT simulated alone on the team's share)\n";
}

// The command after `--` and the flags of `ember sched submit`, over what the spec file said.
void apply_submit_flags(const Flags& f, const std::vector<std::string>& command, proto::JobSpec& spec) {
  if (!command.empty()) {
    spec.set_command(command[0]);
    spec.clear_args();
    for (size_t i = 1; i < command.size(); ++i) spec.add_args(command[i]);
  }
  if (f.has("name")) spec.set_name(f.str("name"));
  if (f.has("devices")) spec.set_devices(static_cast<int>(f.integer("devices", 1, 1, 1 << 20)));
  if (f.has("elastic")) {
    const long long max_batch = spec.elastic().max_batch();  // a spec file's, unless --max-batch
    *spec.mutable_elastic() = parse_elastic(f.str("elastic"), "--elastic");
    spec.mutable_elastic()->set_max_batch(max_batch);
  }
  if (f.has("max-batch")) {
    if (!spec.has_elastic()) throw UsageError("--max-batch: only for an elastic job (--elastic MIN:MAX)");
    spec.mutable_elastic()->set_max_batch(f.integer("max-batch", 1, 1, 1LL << 40));
  }
  if (f.has("mem")) spec.set_memory_gib(f.number("mem", 0, 0, 1e9));
  if (f.has("expected")) spec.set_expected_seconds(f.number("expected", 1, 1e-3, 1e12));
  if (f.has("checkpoint-interval")) spec.set_checkpoint_interval_s(f.number("checkpoint-interval", 0, 0, 1e12));
  if (f.has("priority")) spec.set_priority(static_cast<int>(f.integer("priority", 0, -1000000, 1000000)));
  if (f.has("queue") && f.has("team")) throw UsageError("give one of --queue and --team: they name the same field");
  if (f.has("queue")) spec.set_queue(f.str("queue"));
  if (f.has("team")) spec.set_queue(f.str("team"));
  if (f.has("model")) spec.set_model(f.str("model"));
  if (f.has("checkpoint-dir")) spec.set_checkpoint_dir(f.str("checkpoint-dir"));
  if (f.has("max-restarts")) spec.set_max_restarts(static_cast<int>(f.integer("max-restarts", 0, 0, 1000000)));
  for (const std::string& kv : f.all("env")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--env: expected KEY=VALUE, got '" + kv + "'");
    (*spec.mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (f.has("workdir")) spec.set_workdir(f.str("workdir"));
}

}  // namespace

int sched_submit(const std::vector<std::string>& all_args) {
  // Everything after `--` is the command and its arguments.
  std::vector<std::string> args, command;
  auto dash = std::find(all_args.begin(), all_args.end(), "--");
  args.assign(all_args.begin(), dash);
  if (dash != all_args.end()) command.assign(dash + 1, all_args.end());
  Flags f;
  add_state_flag(f);
  f.add("spec", "FILE",
        "job spec in Protobuf text format (proto/job.proto; - reads standard input); the flags below override it")
      .add("name", "NAME", "job name")
      .add("devices", "N", "gang size (default 1)")
      .add("elastic", "MIN:MAX",
           "an elastic data-parallel job: the daemon resizes it between MIN and MAX devices through its checkpoint "
           "(docs/scheduler/elastic.md)")
      .add("max-batch", "B",
           "an elastic job's largest global batch: above what its devices held in the first run, the daemon "
           "has it accumulate gradients over micro-batches (default: no batch above that)")
      .add("mem", "GIB", "memory needed on each device")
      .add("expected", "S", "expected run time in seconds")
      .add("checkpoint-interval", "S",
           "seconds of work between the job's checkpoints, when it does not checkpoint on SIGTERM")
      .add("priority", "P", "priority (larger first under --policy priority)")
      .add("queue", "Q", "queue or team")
      .add("model", "M", "the job's model family, for a pool of device types (the speed table's rows)")
      .add("team", "T", "the job's team, for a daemon with team quotas (the same field as --queue)")
      .add("checkpoint-dir", "DIR", "the job's checkpoint folder (EMBER_CHECKPOINT_DIR)")
      .add("max-restarts", "R", "restarts after a failure (default 0)")
      .add("env", "K=V", "environment variable for the job (repeatable)", true)
      .add("workdir", "DIR", "working directory (default: the current one)");
  const std::string usage = usage_of("ember sched submit [--spec FILE] [flags] [-- COMMAND ARGS...]", f);
  return run_leaf("ember sched submit", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    proto::JobSpec spec;
    if (f.has("spec")) {
      std::string path = f.str("spec");
      spec = path == "-" ? parse_job_spec(std::string(std::istreambuf_iterator<char>(std::cin), {}), "<stdin>")
                         : read_job_spec(path);
    }
    apply_submit_flags(f, command, spec);
    if (!f.has("spec") && command.empty())
      throw UsageError("nothing to run: give --spec FILE or the command after `--`");
    validate_spec(spec, f.has("spec") ? f.str("spec") : "(command line)");
    namespace fs = std::filesystem;
    // Paths in the spec are the submitter's: resolve them here, where they mean what was meant.
    spec.set_workdir(fs::absolute(spec.workdir().empty() ? fs::current_path() : fs::path(spec.workdir())).string());
    if (!spec.checkpoint_dir().empty())
      spec.set_checkpoint_dir((fs::path(spec.workdir()) / spec.checkpoint_dir()).lexically_normal().string());
    if (spec.name().empty()) spec.set_name(fs::path(spec.command()).filename().string());
    proto::Request req;
    *req.mutable_submit()->mutable_spec() = spec;
    proto::Response r = call(f, req);
    std::cout << "submitted job " << r.job() << " (" << spec.name() << "): ";
    if (r.expected_start_s() < 1)
      std::cout << "started\n";
    else  // with what the estimate rests on: a guess is said to be one
      std::cout << "expected start in ~" << format_delay(r.expected_start_s())
                << (r.expected_start_basis().empty() ? "" : " (" + r.expected_start_basis() + ")") << "\n";
    return 0;
  });
}

int sched_status(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  f.add("job", "ID", "one job in detail")
      .add("all", "", "include finished jobs")
      .add("teams", "",
           "a daemon with --quota: each team's share, use now, and over its completed jobs average JCT, "
           "slowdown and finish-time fairness rho (against the same jobs simulated alone on its share)");
  const std::string usage = usage_of("ember sched status [--job ID] [--all] [--teams]", f);
  return run_leaf("ember sched status", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    if (f.has("teams") && (f.has("job") || f.has("all")))
      throw UsageError("--teams goes alone, without --job or --all");
    proto::Request req;
    req.mutable_status()->set_job(f.integer("job", 0, 1, 1L << 53));
    req.mutable_status()->set_all(f.has("all"));
    req.mutable_status()->set_teams(f.has("teams"));
    proto::Response r = call(f, req);
    if (f.has("teams")) {
      print_teams(r);
      return 0;
    }
    if (f.has("job")) {
      const proto::JobInfo& j = r.jobs(0);
      std::cout << "job " << j.id() << " (" << j.spec().name() << "): " << state_name(j.state()) << "\n"
                << "  owner:       " << (j.owner().empty() ? "-" : j.owner())
                << (j.redacted() ? " (another user's job: command, environment and paths not shown)" : "") << "\n"
                << "  devices:     " << devices_of(j) << "\n"
                << "  run time:    " << fmt_seconds(j.run_seconds()) << " s over " << j.attempts() << " start(s)\n"
                << "  preemptions: " << j.preemptions() << ", restarts: " << j.restarts() << "\n"
                << "  last exit:   "
                << (j.attempts() > 0 && j.state() != proto::RUNNING ? std::to_string(j.exit_code()) : "-")
                << "\n  reason:      " << j.reason()
                << "\n  log:         " << (j.log_path().empty() ? "-" : j.log_path())
                << "\n  pid:         " << (j.pid() ? std::to_string(j.pid()) : "-") << "\n";
      if (j.slurm_job_id()) std::cout << "  slurm job:   " << j.slurm_job_id() << "\n";
      std::cout << "  spec:\n";
      std::istringstream spec(spec_to_text(j.spec()));
      for (std::string line; std::getline(spec, line);) std::cout << "    " << line << "\n";
      std::cout << "  events:\n";
      for (const std::string& e : j.events()) {
        // "epoch-seconds state what": the time as local clock time.
        std::istringstream is(e);
        double t;
        std::string rest;
        is >> t;
        std::getline(is, rest);
        std::time_t tt = static_cast<std::time_t>(t);
        char buf[32];
        std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&tt));
        std::cout << "    " << buf << rest << "\n";
      }
      return 0;
    }
    int busy = 0;
    for (const proto::DeviceInfo& d : r.devices()) busy += d.job() >= 0;
    std::cout << "daemon pid " << r.daemon_pid() << ", policy " << r.policy();
    // A protobuf map's order is unspecified: sorted, so that the line reads the same every time.
    const std::map<std::string, double> counters(r.policy_counters().begin(), r.policy_counters().end());
    const char* sep = " (";
    for (const auto& [k, v] : counters) {
      std::cout << sep << k << " " << v;
      sep = ", ";
    }
    std::cout << (counters.empty() ? "" : ")") << (r.draining() ? ", DRAINING" : "") << "; devices " << busy << "/"
              << r.devices_size() << " busy:";
    for (const proto::DeviceInfo& d : r.devices())
      std::cout << " " << d.name() << "=" << (d.job() >= 0 ? "job" + std::to_string(d.job()) : "free");
    std::cout << "\n";
    print_jobs(r);
    return 0;
  });
}

int sched_queue(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  const std::string usage = usage_of("ember sched queue", f);
  return run_leaf("ember sched queue", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    proto::Request req;
    req.mutable_status();
    proto::Response r = call(f, req);
    // Running and stopping first, then the queue in submission order.
    proto::Response sorted = r;
    sorted.clear_jobs();
    for (int pass = 0; pass < 2; ++pass)
      for (const proto::JobInfo& j : r.jobs())
        if ((j.state() == proto::QUEUED) == (pass == 1)) *sorted.add_jobs() = j;
    print_jobs(sorted);
    return 0;
  });
}

int sched_cancel(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  f.add("job", "ID", "the job to cancel (a running one gets SIGTERM, then SIGKILL after the grace period)");
  const std::string usage = usage_of("ember sched cancel --job ID", f);
  return run_leaf("ember sched cancel", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    if (!f.has("job")) throw UsageError("--job is required");
    proto::Request req;
    req.mutable_cancel()->set_job(f.integer("job", 0, 1, 1L << 53));
    call(f, req);
    std::cout << "cancelled job " << req.cancel().job() << "\n";
    return 0;
  });
}

int sched_preempt(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  f.add("job", "ID", "the running job to stop (SIGTERM: it checkpoints, exits 75 and waits in the queue again)");
  const std::string usage = usage_of("ember sched preempt --job ID", f);
  return run_leaf("ember sched preempt", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    if (!f.has("job")) throw UsageError("--job is required");
    proto::Request req;
    req.mutable_preempt()->set_job(f.integer("job", 0, 1, 1L << 53));
    call(f, req);
    std::cout << "preempting job " << req.preempt().job() << "\n";
    return 0;
  });
}

int sched_logs(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  f.add("job", "ID", "whose output")
      .add("follow", "", "keep printing until the job ends")
      .add("tail", "BYTES", "start this many bytes before the end");
  const std::string usage = usage_of("ember sched logs --job ID [--follow] [--tail BYTES]", f);
  return run_leaf("ember sched logs", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    if (!f.has("job")) throw UsageError("--job is required");
    int64_t offset = f.has("tail") ? -f.integer("tail", 0, 0, 1L << 40) : 0;
    for (;;) {
      proto::Request req;
      req.mutable_logs()->set_job(f.integer("job", 0, 1, 1L << 53));
      req.mutable_logs()->set_offset(offset);
      proto::Response r = call(f, req);
      std::cout << r.log() << std::flush;
      offset = r.log_offset() + static_cast<int64_t>(r.log().size());
      bool more = offset < r.log_size();
      bool active = r.jobs_size() > 0 && (r.jobs(0).state() == proto::QUEUED || r.jobs(0).state() == proto::RUNNING ||
                                          r.jobs(0).state() == proto::STOPPING);
      if (more) continue;
      if (!f.has("follow") || !active) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
}

int sched_drain(const std::vector<std::string>& args) {
  Flags f;
  add_state_flag(f);
  f.add("preempt", "", "stop running jobs now through their checkpoints (they stay queued for the next daemon)")
      .add("wait", "", "return only once the daemon has exited");
  const std::string usage = usage_of("ember sched drain [--preempt] [--wait]", f);
  return run_leaf("ember sched drain", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    proto::Request req;
    req.mutable_drain()->set_preempt(f.has("preempt"));
    call(f, req);
    std::cout << "draining: no new jobs start; the daemon exits once nothing runs\n";
    if (f.has("wait")) {
      for (;;) {
        try {
          proto::Request st;
          st.mutable_status();
          call_daemon(state_dir(f), st, 5);
        } catch (const Error&) {
          break;  // nobody answers: the daemon is gone
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      std::cout << "the daemon has exited\n";
    }
    return 0;
  });
}

}  // namespace ember::tools
