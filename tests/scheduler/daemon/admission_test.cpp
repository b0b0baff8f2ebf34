// The daemon's admission control with real processes: submissions are told their start estimate,
// and one over --admit-target is refused with the time to resubmit.
#include <gtest/gtest.h>

#include "daemon_fixture.h"

using namespace daemon_test;

namespace {

// Admission in the daemon: each submission is told its start estimate; over --admit-target it is
// refused with the time to resubmit. One device, FCFS, jobs that say they take 50 s.
TEST_F(DaemonTest, SubmissionsAreToldTheirStartEstimateAndRefusedOverTheTarget) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs", "--admit-target", "100"});
  auto submit_gated = [&](const std::string& name) {
    return cli({"submit", "--name", name, "--expected", "50", "--", "/bin/sh", "-c", wait_gate("gate")});
  };
  Result a = submit_gated("a");
  EXPECT_EQ(a.status, 0) << a.out;
  EXPECT_NE(a.out.find("(a): started"), std::string::npos) << a.out;
  Result b = submit_gated("b");  // behind a: about 50 s
  EXPECT_EQ(b.status, 0) << b.out;
  EXPECT_NE(b.out.find("(b): expected start in ~"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find(" s (from the --expected times of 1 job ahead)\n"), std::string::npos)
      << "under a minute: " << b.out;
  Result c = submit_gated("c");  // behind a and b: just under 100 s
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_NE(c.out.find("(c): expected start in ~1 min"), std::string::npos) << c.out;
  Result d = submit_gated("d");  // about 150 s: over the target
  EXPECT_NE(d.status, 0) << d.out;
  EXPECT_NE(d.out.find("job 'd' would start in ~2 min"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("over the daemon's start-delay target of 1 min 40 s (--admit-target); resubmit in ~"),
            std::string::npos)
      << d.out;
  EXPECT_EQ(status().jobs_size(), 3);
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(1) && finished(2) && finished(3); }));
}

// A fresh daemon has no finished job to learn run times from: an estimate that rests on a prior
// guess for the job ahead says so (the history's own basis is tests/scheduler/admission_test.cpp's).
TEST_F(DaemonTest, AStartEstimateWithNoHistorySaysItIsAGuess) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  auto submit_gated = [&](const std::string& name) {
    return cli({"submit", "--name", name, "--", "/bin/sh", "-c", wait_gate("gate")});
  };
  Result a = submit_gated("a");
  EXPECT_NE(a.out.find("(a): started"), std::string::npos) << a.out;
  Result b = submit_gated("b");  // behind a, whose run time nothing tells
  EXPECT_EQ(b.status, 0) << b.out;
  EXPECT_NE(b.out.find("(b): expected start in ~60 min (a guess: no job has finished here yet, too few to learn run "
                       "times from, so 1 job ahead without --expected is taken to run 1 h)"),
            std::string::npos)
      << b.out;
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(1) && finished(2); }));
}

}  // namespace
