// The daemon with team quotas, real processes on CPU virtual devices: a team's idle share is lent,
// and taken back through the borrower's checkpoint (SIGTERM, exit 75) when the owner submits;
// the borrower resumes and ends bit-identical to an uninterrupted run. Jobs of a team without a
// share are refused, and so is a quota file the pool cannot honour.
#include <gtest/gtest.h>

#include "daemon_fixture.h"

using namespace daemon_test;

namespace {

TEST_F(DaemonTest, ALentDeviceIsReclaimedThroughTheBorrowersCheckpoint) {
  const std::string want = reference(20);
  write_file(dir_ + "/quota.txt", "# two teams, one device each\nvision 1\nspeech 1\n");
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--quota", dir_ + "/quota.txt"});

  JobSpec own = gated("vision-own", 1, "own-gate");
  own.set_queue("vision");
  const int64_t a = submit(own);
  ASSERT_TRUE(wait_for([&] { return job(a).state() == ember::proto::RUNNING; }));
  // vision's second job borrows speech's idle device.
  JobSpec borrow = trainer("vision-borrow", 20, "gate", 10);
  borrow.set_queue("vision");
  const int64_t b = submit(borrow);
  ASSERT_TRUE(wait_for([&] { return log_of(b).find("waiting for gate at step 10") != std::string::npos; }));
  EXPECT_EQ(job(b).state(), ember::proto::RUNNING);

  // speech's job takes its share back: the borrower is preempted, not vision's own job.
  JobSpec owner = trainer("speech-job", 3, "", -1);
  owner.set_queue("speech");
  const int64_t c = submit(owner);
  ASSERT_TRUE(wait_for([&] { return job(b).preemptions() == 1; }));
  ASSERT_TRUE(wait_for([&] { return finished(c); }));
  EXPECT_EQ(job(c).state(), ember::proto::DONE) << job(c).reason();
  EXPECT_EQ(job(a).state(), ember::proto::RUNNING);
  EXPECT_EQ(job(a).preemptions(), 0);

  // The borrower gets the device again once speech is done, and resumes where it stopped.
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(b); }));
  JobInfo jb = job(b);
  EXPECT_EQ(jb.state(), ember::proto::DONE) << jb.reason();
  EXPECT_EQ(jb.attempts(), 2);
  EXPECT_NE(log_of(b).find("preempted at step 10"), std::string::npos) << log_of(b);
  EXPECT_NE(log_of(b).find("resumed from step 10"), std::string::npos) << log_of(b);
  EXPECT_EQ(read_file(dir_ + "/vision-borrow.txt"), want) << "resumed run differs from the uninterrupted one";
  write_file(dir_ + "/own-gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a); }));
  EXPECT_EQ(job(a).state(), ember::proto::DONE) << job(a).reason();

  // A team the quota file does not name is refused at submission, through the client too.
  JobSpec stranger = gated("stranger", 1, "never");
  stranger.set_queue("nlp");
  Request q;
  *q.mutable_submit()->mutable_spec() = stranger;
  Response r = ember::sched::call_daemon(state_, q, 10);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("team 'nlp' has no share in the quota file"), std::string::npos) << r.error();
  Result cr = cli({"submit", "--team", "nlp", "--", "/bin/true"});
  EXPECT_NE(cr.status, 0);
  EXPECT_NE(cr.out.find("team 'nlp' has no share"), std::string::npos) << cr.out;
  cr = cli({"submit", "--team", "speech", "--queue", "vision", "--", "/bin/true"});
  EXPECT_EQ(cr.status, 2) << cr.out;
  EXPECT_NE(cr.out.find("give one of --queue and --team"), std::string::npos) << cr.out;
}

TEST_F(DaemonTest, TheTeamsReportShowsSharesUseAndFairness) {
  write_file(dir_ + "/quota.txt", "vision 1\nspeech 1\n");
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--quota", dir_ + "/quota.txt"});
  auto teams = [&] {
    Request q;
    q.mutable_status()->set_teams(true);
    Response r = ember::sched::call_daemon(state_, q, 10);
    EXPECT_TRUE(r.ok()) << r.error();
    return r;
  };
  Response r = teams();
  ASSERT_EQ(r.teams_size(), 2);
  EXPECT_EQ(r.teams(0).name(), "speech");
  EXPECT_EQ(r.teams(1).name(), "vision");
  EXPECT_EQ(r.teams(1).share(), 1);
  EXPECT_EQ(r.teams(1).completed(), 0);
  EXPECT_EQ(r.teams_max_rho(), 0);

  // speech completes a job; vision holds its own device and borrows speech's for a second job.
  JobSpec done = trainer("speech-job", 3, "", -1);
  done.set_queue("speech");
  const int64_t c = submit(done);
  ASSERT_TRUE(wait_for([&] { return finished(c); }));
  ASSERT_EQ(job(c).state(), ember::proto::DONE) << job(c).reason();
  JobSpec own = gated("vision-own", 1, "gate"), borrow = gated("vision-borrow", 1, "gate");
  own.set_queue("vision");
  borrow.set_queue("vision");
  const int64_t a = submit(own), b = submit(borrow);
  ASSERT_TRUE(
      wait_for([&] { return job(a).state() == ember::proto::RUNNING && job(b).state() == ember::proto::RUNNING; }));
  r = teams();
  ASSERT_EQ(r.teams_size(), 2);
  const auto& speech = r.teams(0);
  const auto& vision = r.teams(1);
  EXPECT_EQ(vision.running(), 2);
  EXPECT_EQ(vision.devices_held(), 2);
  EXPECT_EQ(vision.completed(), 0);
  EXPECT_EQ(speech.completed(), 1);
  EXPECT_EQ(speech.devices_held(), 0);
  // Alone on its device the speech job starts at once and its JCT is its work; on the daemon its
  // JCT is submission to exit, which holds its whole run: rho is at least 1 (by the launch's
  // latency, which a test cannot bound on a loaded machine).
  EXPECT_GT(speech.avg_jct_s(), 0);
  EXPECT_GE(speech.avg_slowdown(), 1.0 - 1e-9);
  EXPECT_GT(speech.alone_avg_jct_s(), 0);
  EXPECT_LE(speech.alone_avg_jct_s(), speech.avg_jct_s() + 1e-9);
  EXPECT_NEAR(speech.rho(), speech.avg_jct_s() / speech.alone_avg_jct_s(), 1e-9);
  EXPECT_DOUBLE_EQ(r.teams_max_rho(), speech.rho());
  EXPECT_DOUBLE_EQ(r.teams_jain(), 1.0);  // one team with completed jobs
  // Through the client, as a table.
  Result cr = cli({"status", "--teams"});
  EXPECT_EQ(cr.status, 0) << cr.out;
  EXPECT_NE(cr.out.find("TEAM"), std::string::npos) << cr.out;
  EXPECT_NE(cr.out.find("max rho"), std::string::npos) << cr.out;
  cr = cli({"status", "--teams", "--all"});
  EXPECT_EQ(cr.status, 2) << cr.out;
  EXPECT_NE(cr.out.find("--teams goes alone"), std::string::npos) << cr.out;
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a) && finished(b); }));
}

// On a pool of device types the alone runs take a slice of each type and the pool's speed table:
// a job of a model the table has is simulated at its speed there.
TEST_F(DaemonTest, TheTeamsReportOnATypedPoolSimulatesTheShareWithItsSpeeds) {
  write_file(dir_ + "/speeds.csv", "model,slow,fast\nx,2,4\n");
  write_file(dir_ + "/quota.txt", "vision 1\nspeech 1\n");
  start_daemon({"--devices", "cpu:1@slow,1@fast", "--policy", "fcfs", "--speeds", dir_ + "/speeds.csv", "--quota",
                dir_ + "/quota.txt"});
  JobSpec j = trainer("vision-job", 3, "", -1);
  j.set_queue("vision");
  j.set_model("x");
  const int64_t id = submit(j);
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  ASSERT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
  Request q;
  q.mutable_status()->set_teams(true);
  Response r = ember::sched::call_daemon(state_, q, 10);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r.teams_size(), 2);
  const auto& vision = r.teams(1);
  EXPECT_EQ(vision.completed(), 1);
  // One device of the share: the slow type (the largest remainder, ties to the type listed first),
  // where model x does two seconds of work a second, so the alone run takes half the job's work.
  const JobInfo info = job(id);
  EXPECT_NEAR(vision.alone_avg_jct_s(), (info.run_seconds() - info.lost_seconds()) / 2, 1e-6);
  EXPECT_NEAR(vision.rho(), vision.avg_jct_s() / vision.alone_avg_jct_s(), 1e-9);
}

TEST_F(DaemonTest, ATeamsReportFromADaemonWithoutQuotasIsAnError) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  Result cr = cli({"status", "--teams"});
  EXPECT_NE(cr.status, 0) << cr.out;
  EXPECT_NE(cr.out.find("this daemon has no team quotas (start it with --quota FILE)"), std::string::npos) << cr.out;
}

TEST_F(DaemonTest, ARestartedDaemonWhoseQuotaFileLostALiveJobsTeamRefusesToStart) {
  write_file(dir_ + "/quota.txt", "vision 1\nspeech 1\n");
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--quota", dir_ + "/quota.txt"});
  JobSpec j = gated("speech-job", 1, "gate");
  j.set_queue("speech");
  const int64_t id = submit(j);
  ASSERT_TRUE(wait_for([&] { return job(id).state() == ember::proto::RUNNING; }));
  kill_daemon();
  write_file(dir_ + "/quota.txt", "vision 2\n");
  Result r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:2", "--policy", "fcfs", "--quota",
                  dir_ + "/quota.txt"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("job " + std::to_string(id) + " (speech-job)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("team 'speech' has no share in the quota file"), std::string::npos) << r.out;
  write_file(dir_ + "/gate", "");  // the orphaned job ends
}

TEST_F(DaemonTest, AQuotaFileThePoolCannotHonourIsRefused) {
  write_file(dir_ + "/quota.txt", "vision 2\nspeech 2\n");
  Result r =
      run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:3", "--quota", dir_ + "/quota.txt"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("the shares add up to 4 devices but the cluster has 3"), std::string::npos) << r.out;
  r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:3", "--policy", "greedy", "--quota",
           dir_ + "/quota.txt"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cannot run inside team quotas"), std::string::npos) << r.out;
}

}  // namespace
