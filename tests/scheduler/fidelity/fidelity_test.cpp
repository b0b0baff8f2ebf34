// Fidelity: the simulator against the real daemon on the same jobs. The 60-job trace
// (shared/data/traces/tiresias_60_job.csv), its times scaled by 1/80 so that it runs in about a
// minute, is submitted to `ember sched serve` on 8 CPU devices as it arrives, each job a
// sched_sleeper that does its duration of work and checkpoints on SIGTERM. The simulator then
// runs the same policy on the same arrivals (the submission times the daemon recorded) and
// durations. What may differ is only what the daemon does on a real machine: launches, signals,
// exits and decisions taking their time, events that coincide in the trace arriving in some order.
// The bounds are issue 25's (Pollux and Gavel report checks of this kind): the median job's JCT
// within 5% and the average JCT within 3%. The table of each run is printed.
//
// Label `fidelity`: Release builds only, where the daemon runs at the speed a user's does (under
// a sanitizer its decisions would take many times longer than the scaled trace allows).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "scheduler/daemon/daemon_fixture.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/trace.h"
#include "shared_data.h"

using namespace daemon_test;
namespace sched = ember::sched;

namespace {

constexpr double kScale = 1.0 / 80;  // wall seconds per trace second
constexpr int kDevices = 8;

class Fidelity : public DaemonTest, public ::testing::WithParamInterface<std::string> {};

// Job t of the trace as the daemon runs it: the sleeper, for its scaled duration, on t's devices.
JobSpec sleeper_job(const sched::JobSpec& t, const std::string& dir) {
  JobSpec s;
  s.set_name(t.name);
  s.set_command(SCHED_SLEEPER_EXE);
  for (const std::string& a : {std::string("--seconds"), std::to_string(t.duration * kScale), std::string("--progress"),
                               dir + "/progress-" + t.name})
    s.add_args(a);
  s.set_devices(t.gpus);
  s.set_expected_seconds(t.duration * kScale);
  s.set_workdir(dir);
  return s;
}

// What a start costs on this machine, as the daemon ran it: its time on devices beyond the work
// (launching the job, noticing its exit), per start. The simulator is told, as it would be told
// the launch time of a real cluster; on a loaded machine this grows, and so would every JCT.
double start_cost(const std::vector<sched::JobSpec>& trace, const std::vector<int64_t>& ids,
                  const std::map<int64_t, JobInfo>& info) {
  double overhead = 0;
  int starts = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const JobInfo& j = info.at(ids[i]);
    overhead += std::max(0.0, j.run_seconds() - trace[i].duration * kScale);
    starts += j.attempts();
  }
  return overhead / starts;
}

TEST_P(Fidelity, DaemonAndSimulatorAgreeOnTheSixtyJobTrace) {
  const std::string path =
      (fs::path(EMBER_SOURCE_DIR) / "../shared/data/traces/tiresias_60_job.csv").lexically_normal();
  EMBER_NEEDS_SHARED_FILE(path);
  const std::vector<sched::JobSpec> trace = sched::read_trace(path);
  ASSERT_EQ(trace.size(), 60u);
  const std::string policy = GetParam();
  // LAS's queue thresholds are device-seconds: scaled with the clock (its defaults, 900, 9000 and
  // 90000, over 80). Everything else the three policies use is scale-free.
  sched::PolicyParams params;
  if (policy == "las") params["las.thresholds"] = "11.25,112.5,1125";
  std::vector<std::string> args = {"--devices", "cpu:" + std::to_string(kDevices), "--policy", policy, "--quiet"};
  for (const auto& [k, v] : params) args.insert(args.end(), {"--set", k + "=" + v});
  start_daemon(args);

  // Submit each job at its scaled arrival time, in arrival order (the trace is sorted).
  std::vector<int64_t> ids;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < trace.size(); ++i) {
    const sched::JobSpec& t = trace[i];
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(t.submit * kScale));
    ids.push_back(submit(sleeper_job(t, dir_)));
  }
  ASSERT_TRUE(wait_for(
      [&] {
        Response st = status();
        int done = 0;
        for (const JobInfo& j : st.jobs()) done += j.state() == ember::proto::DONE;
        return done == static_cast<int>(ids.size());
      },
      600))
      << "not every job finished";

  // The same arrivals through the simulator.
  Response st = status();
  std::map<int64_t, JobInfo> info;
  for (const JobInfo& j : st.jobs()) info[j.id()] = j;
  const double first_submit = info.at(ids.front()).submit_time();
  std::vector<sched::JobSpec> sim_trace;
  for (size_t i = 0; i < ids.size(); ++i) {
    sched::JobSpec s = trace[i];
    s.submit = info.at(ids[i]).submit_time() - first_submit;
    s.duration = s.estimate = trace[i].duration * kScale;
    sim_trace.push_back(s);
  }
  sched::SimOptions so;
  so.start_delay = start_cost(trace, ids, info);
  std::unique_ptr<sched::Policy> p = sched::make_policy(policy, params);
  const sched::SimResult sim = sched::simulate(sim_trace, sched::Topology::uniform(kDevices, 0), *p, so);

  std::vector<double> err;
  double daemon_sum = 0, sim_sum = 0;
  int daemon_preemptions = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const JobInfo& j = info.at(ids[i]);
    const double d = j.finish_time() - j.submit_time(), s = sim.jobs[i].jct();
    daemon_sum += d;
    sim_sum += s;
    daemon_preemptions += j.preemptions();
    err.push_back(std::abs(d - s) / s);
  }
  const double n = static_cast<double>(ids.size());
  const double avg_err = std::abs(daemon_sum - sim_sum) / sim_sum;
  const double median = sched::percentile(err, 0.5), p90 = sched::percentile(err, 0.9);
  std::printf(
      "fidelity %s (60 jobs, %d devices, times x 1/80, a start costs %.1f ms): avg JCT daemon %.3f s, simulator "
      "%.3f s (%+.2f%%); per-job |error| median %.2f%%, p90 %.2f%%, max %.2f%%; preemptions daemon %d, simulator "
      "%.0f\n",
      policy.c_str(), kDevices, 1000 * so.start_delay, daemon_sum / n, sim_sum / n,
      100 * (daemon_sum - sim_sum) / sim_sum, 100 * median, 100 * p90, 100 * *std::max_element(err.begin(), err.end()),
      daemon_preemptions, sim.metrics.preemptions_per_job * n);
  EXPECT_LE(median, 0.05) << "the median job's JCT differs by more than 5%";
  EXPECT_LE(avg_err, 0.03) << "the average JCT differs by more than 3%";
}

INSTANTIATE_TEST_SUITE_P(Policies, Fidelity, ::testing::Values("fcfs", "las", "srsf"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
