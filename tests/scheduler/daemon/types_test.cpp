// A daemon pool of device types (typed CPU virtual devices) under the heterogeneity-aware policy,
// with real processes: each job ends up on the type its model gains most on, moved there through
// a preemption when it started elsewhere.
#include <gtest/gtest.h>

#include "daemon_fixture.h"

using namespace daemon_test;

namespace {

TEST_F(DaemonTest, GavelMovesEachJobToTheTypeItGainsMostOn) {
  write_file(dir_ + "/speeds.csv", "model,slow,fast\nx,1,4\ny,1,1.1\n");
  start_daemon({"--devices", "cpu:1@slow,1@fast", "--policy", "gavel", "--set", "gavel.throughput=1", "--set",
                "gavel.round=1", "--speeds", dir_ + "/speeds.csv"});
  JobSpec y = gated("y", 1, "gate");
  y.set_model("y");
  JobSpec x = gated("x", 1, "gate");
  x.set_model("x");
  // y arrives first and takes the fast device (it is faster there too); x gets the slow one.
  const int64_t iy = submit(y);
  ASSERT_TRUE(wait_for([&] { return job(iy).state() == ember::proto::RUNNING; }));
  ASSERT_EQ(job(iy).device_names_size(), 1);
  EXPECT_EQ(job(iy).device_names(0), "cpu1");
  const int64_t ix = submit(x);
  // At the next round the program gives fast to x (4x) and slow to y (1.1x): they swap.
  ASSERT_TRUE(wait_for([&] {
    JobInfo jx = job(ix), jy = job(iy);
    return jx.state() == ember::proto::RUNNING && jx.device_names_size() == 1 && jx.device_names(0) == "cpu1" &&
           jy.state() == ember::proto::RUNNING && jy.device_names_size() == 1 && jy.device_names(0) == "cpu0";
  })) << read_file(dir_ + "/daemon.out");
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(ix) && finished(iy); }));
  EXPECT_EQ(job(ix).state(), ember::proto::DONE) << job(ix).reason();
  EXPECT_EQ(job(iy).state(), ember::proto::DONE) << job(iy).reason();
  EXPECT_GE(job(iy).preemptions(), 1);  // moved off the fast device

  // A model the table does not have is refused at submission.
  JobSpec z = gated("z", 1, "gate");
  z.set_model("quantum");
  Request q;
  *q.mutable_submit()->mutable_spec() = z;
  Response r = ember::sched::call_daemon(state_, q, 10);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("model 'quantum' is not in the speed table (models: x, y)"), std::string::npos) << r.error();
}

// A gang wider than every type of the pool (two devices, one of each type) runs across both under
// gavel, after the one-device job ahead of it; before, gavel never started it and it queued for good.
TEST_F(DaemonTest, GavelRunsAGangWiderThanEveryTypeAcrossTypes) {
  write_file(dir_ + "/speeds.csv", "model,slow,fast\nx,1,4\n");
  start_daemon({"--devices", "cpu:1@slow,1@fast", "--policy", "gavel", "--set", "gavel.round=1", "--speeds",
                dir_ + "/speeds.csv"});
  JobSpec one = gated("one", 1, "gate");
  one.set_model("x");
  const int64_t a = submit(one);
  ASSERT_TRUE(wait_for([&] { return job(a).state() == ember::proto::RUNNING; }));
  JobSpec wide = trainer("wide", 3, "", -1);
  wide.set_devices(2);
  wide.set_model("x");
  const int64_t w = submit(wide);
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a) && finished(w); })) << read_file(dir_ + "/daemon.out");
  EXPECT_EQ(job(a).state(), ember::proto::DONE) << job(a).reason();
  const JobInfo jw = job(w);
  EXPECT_EQ(jw.state(), ember::proto::DONE) << jw.reason();
  EXPECT_EQ(jw.preemptions(), 0);
}

// GPUs of two kinds, named by a stand-in nvidia-smi: the pool is typed from the names, gavel reads
// the built-in speed table, and a job runs on the GPU of the kind its model gains most on.
TEST_F(DaemonTest, GpusOfSeveralKindsAreTypedFromTheirNames) {
  start_daemon_on_fake_gpus({"0, 32768, Tesla V100-SXM2-32GB", "1, 143771, NVIDIA H200"},
                            {"--devices", "gpu", "--policy", "gavel", "--set", "gavel.round=1"});
  const std::string out = read_file(dir_ + "/daemon.out");
  EXPECT_NE(out.find("gpu0 (v100, 32 GiB) gpu1 (h200, "), std::string::npos) << out;
  JobSpec s = gated("t", 1, "gate");
  s.set_model("transformer");
  const int64_t id = submit(s);
  ASSERT_TRUE(wait_for([&] { return job(id).state() == ember::proto::RUNNING; }));
  ASSERT_EQ(job(id).device_names_size(), 1);
  EXPECT_EQ(job(id).device_names(0), "gpu1") << "alone, a job gets the faster kind";
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
}

// Kinds the built-in table lacks, and no --speeds: the daemon serves them as one type and says so,
// rather than refusing to start on a mixed workstation.
TEST_F(DaemonTest, GpuKindsTheSpeedTableLacksAreServedAsOneType) {
  start_daemon_on_fake_gpus({"0, 24576, NVIDIA GeForce RTX 4090", "1, 24576, NVIDIA GeForce RTX 3090"},
                            {"--devices", "gpu", "--policy", "fcfs"});
  const std::string out = read_file(dir_ + "/daemon.out");
  EXPECT_NE(out.find("GPU type 'rtx4090' is not in the built-in speed table"), std::string::npos) << out;
  JobSpec s = gated("t", 2, "gate");
  write_file(dir_ + "/gate", "");
  const int64_t id = submit(s);
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
}

TEST_F(DaemonTest, TypedDevicesAndSpeedsAreCheckedAtStart) {
  Result r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:1@slow,x@fast"});
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("expected a whole number between 1 and 4096, got 'x'"), std::string::npos) << r.out;
  r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:1@tpu"});
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("device type 'tpu' is not in the speed table"), std::string::npos) << r.out;
  r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:2", "--speeds", "x.csv"});
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--speeds: the pool has one device type"), std::string::npos) << r.out;
}

}  // namespace
