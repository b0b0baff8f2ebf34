// The daemon killed outright (SIGKILL) at random moments, again and again, while 50 jobs are
// submitted, started, preempted (LAS with a tiny first queue preempts constantly) and finished,
// and restarted each time on the same state folder. Afterwards: no acknowledged job is lost or
// stuck, none ever ran twice at once (each job holds an exclusive lock while it runs and reports
// finding it taken), and every finished job's exit status is the one it exited with.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>

#include "daemon_fixture.h"

using namespace daemon_test;

namespace {

constexpr int kJobs = 50;
constexpr int kMinKills = 20;

class DaemonCrashTest : public DaemonTest {
 protected:
  // Job i sleeps a little under an exclusive lock of its own and exits with i % 5 == 0 ? 3 : 0; a
  // run that finds its lock taken (another run of the same job still alive) notes it in `double`.
  JobSpec locked_job(int i) {
    JobSpec s;
    s.set_name("job" + std::to_string(i));
    s.set_command("/bin/sh");
    s.add_args("-c");
    const std::string code = i % 5 == 0 ? "3" : "0";
    s.add_args("flock -n -E 99 " + dir_ + "/lock-" + std::to_string(i) + " sh -c 'sleep 0.2; exit " + code +
               "'; s=$?; [ $s -eq 99 ] && echo " + std::to_string(i) + " >> " + dir_ + "/double; exit $s");
    s.set_workdir(dir_);
    return s;
  }

  void restart() {
    kill_daemon();
    start_daemon(args_);
  }

  std::vector<std::string> args_ = {"--devices",           "cpu:4",   "--policy", "las", "--set",
                                    "las.thresholds=0.05", "--grace", "2"};
};

TEST_F(DaemonCrashTest, KilledAtRandomMomentsItLosesNoJobAndRunsNoneTwice) {
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> pause_ms(0, 300), burst(1, 5);
  start_daemon(args_);
  std::map<int64_t, int> ids;  // job id -> i
  int kills = 0, next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  auto all_done = [&] {
    if (next < kJobs) return false;
    Response st = status();
    int done = 0;
    for (const JobInfo& j : st.jobs()) done += j.state() == ember::proto::DONE || j.state() == ember::proto::FAILED;
    return done == kJobs;
  };
  while (!(kills >= kMinKills && all_done())) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the jobs did not finish; " << kills << " kills so far";
    for (int b = burst(rng); b > 0 && next < kJobs; --b, ++next) ids[submit(locked_job(next))] = next;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(rng)));
    restart();
    ++kills;
  }
  Response st = status();
  ASSERT_EQ(st.jobs_size(), kJobs) << "a job was lost or appeared twice";
  for (const JobInfo& j : st.jobs()) {
    ASSERT_TRUE(ids.count(j.id())) << "job " << j.id() << " was never acknowledged";
    const int i = ids[j.id()];
    const bool fails = i % 5 == 0;
    EXPECT_EQ(j.state(), fails ? ember::proto::FAILED : ember::proto::DONE) << j.spec().name() << ": " << j.reason();
    EXPECT_EQ(j.exit_code(), fails ? 3 : 0) << j.spec().name() << ": " << j.reason();
    EXPECT_GE(j.attempts(), 1);
  }
  EXPECT_FALSE(fs::exists(dir_ + "/double")) << "ran twice at once: " << read_file(dir_ + "/double");
  int preemptions = 0;
  for (const JobInfo& j : st.jobs()) preemptions += j.preemptions();
  std::printf("%d kills of the daemon; %d jobs finished, %d preemptions on the way\n", kills, kJobs, preemptions);
}

}  // namespace
