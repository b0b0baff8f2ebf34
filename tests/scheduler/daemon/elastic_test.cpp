// An elastic job through the real daemon (docs/scheduler/elastic.md, "The daemon's elastic jobs"):
// a data-parallel MnistCnn under `ember launch`, submitted with elastic 1:2 on a pool of two CPU
// devices, is started on one rank, grown to two once it has reported its throughput, and shrunk to
// one when a rigid job arrives, each time through its checkpoint. Checked: the resumes, the step
// count carried over, the noise scale and throughput reaching the daemon, and the final metrics
// against one process run on the same global batch schedule (the batches, learning-rate factors
// and stop steps the daemon's runs had).
#include <initializer_list>
#include <regex>

#include "daemon_fixture.h"

#ifdef MNIST_CNN_EXE

namespace daemon_test {
namespace {

struct Attempt {
  long batch = 32;
  std::string lr_scale = "1";
  long stop_step = -1;  // -1: ran to the end
};

// The runs of the job from its log (stop steps) and the daemon's output (batch and rate per run).
std::vector<Attempt> attempts_of(const std::string& log, const std::string& daemon_out) {
  std::vector<Attempt> out;
  std::regex head("=== ember sched: job 1 attempt (\\d+)"), stop("Stopped by a signal at step (\\d+)");
  std::regex chosen("job 1 elastic: \\d+ devices, global batch (\\d+), learning rate x ([0-9.e+-]+)");
  for (std::sregex_iterator it(log.begin(), log.end(), head), end; it != end; ++it) out.emplace_back();
  size_t i = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), stop), end; it != end && i < out.size(); ++it, ++i)
    out[i].stop_step = std::stol((*it)[1]);
  i = 1;  // the first run has the job's own batch and rate
  for (std::sregex_iterator it(daemon_out.begin(), daemon_out.end(), chosen), end; it != end && i < out.size();
       ++it, ++i) {
    out[i].batch = std::stol((*it)[1]);
    out[i].lr_scale = (*it)[2];
  }
  return out;
}

// The rows of a metrics CSV, by column.
std::vector<std::map<std::string, double>> rows_of(const std::string& csv) {
  std::istringstream in(csv);
  std::string header, line;
  std::getline(in, header);
  std::vector<std::map<std::string, double>> rows;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::map<std::string, double>& row = rows.emplace_back();
    std::istringstream h(header), v(line);
    std::string name, value;
    while (std::getline(h, name, ',') && std::getline(v, value, ',')) row[name] = std::stod(value);
  }
  return rows;
}

// A small learning rate: the two-rank steps' float differences grow with every step, the faster
// the larger the rate (at 0.001 they reached 0.3% of the test loss an epoch after the last resize).
// 16 epochs: the run at two ranks must outlast the test's reaction to its first noise report (at
// 130 steps a second on this machine, 3 epochs were over before the rigid job arrived).
constexpr double kLr = 2e-4;

std::vector<std::string> mnist_args(const std::string& ckpt) {
  return {"--lr",      "0.0002", "--limit",          "2048", "--epochs", "16",   "--batch-size", "32", "--threads", "1",
          "--workers", "0",      "--checkpoint-dir", ckpt,   "--resume", "auto", "--seed",       "3"};
}

// The step at the end of each epoch by the documented rule (docs/scheduler/elastic.md): each run
// trains at its batch; a resume at another batch continues at the examples done so far in the
// epoch, rounded down to a whole batch of the new size. `examples` per epoch, `epochs` in all.
std::vector<double> epoch_end_steps(const std::vector<Attempt>& runs, long examples, int epochs) {
  std::vector<double> ends;
  long step = 0, done = 0;
  for (size_t i = 0; i < runs.size() && static_cast<int>(ends.size()) < epochs; ++i) {
    const long b = runs[i].batch;
    done = done / b * b;
    while (static_cast<int>(ends.size()) < epochs && (runs[i].stop_step < 0 || step < runs[i].stop_step)) {
      ++step;
      done += b;
      if (done + b > examples) {  // the loader drops a last partial batch (data-parallel: drop_last)
        ends.push_back(static_cast<double>(step));
        done = 0;
      }
    }
  }
  return ends;
}

// Runs one process on the elastic job's schedule (each run's batch and rate, stopped at the same
// steps) and compares the metrics logs.
void expect_one_process_agrees(const std::vector<Attempt>& runs, const std::string& dir_, const std::string& log) {
  // One process on the same schedule: each run's batch and rate, stopped at the same steps.
  for (const Attempt& a : runs) {
    std::vector<std::string> argv = {"/usr/bin/env", "EMBER_ELASTIC_RANKS=1",
                                     "EMBER_ELASTIC_BATCH=" + std::to_string(a.batch),
                                     "EMBER_ELASTIC_LR_SCALE=" + a.lr_scale, MNIST_CNN_EXE};
    for (const std::string& x : mnist_args(dir_ + "/ref")) argv.push_back(x);
    if (a.stop_step > 0) argv.insert(argv.end(), {"--max-steps", std::to_string(a.stop_step)});
    Result r = run(argv, EMBER_SOURCE_DIR);
    ASSERT_EQ(r.status, 0) << r.out;
  }
  const std::string got_csv = read_file(dir_ + "/ckpt/metrics.csv"), want_csv = read_file(dir_ + "/ref/metrics.csv");
  const auto got = rows_of(got_csv), want = rows_of(want_csv);
  ASSERT_EQ(got.size(), want.size()) << got_csv << want_csv << log;
  ASSERT_FALSE(got.empty());
  const std::string both = "elastic:\n" + got_csv + "one process:\n" + want_csv;
  const std::vector<double> ends = epoch_end_steps(runs, 2048, 16);
  ASSERT_EQ(ends.size(), got.size()) << both;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].at("step"), ends[i]) << "epoch " << i + 1 << " does not end where the batches say\n" << both;
    EXPECT_EQ(got[i].at("step"), want[i].at("step")) << both;
    EXPECT_EQ(got[i].at("epoch"), want[i].at("epoch")) << both;
  }
  // The first evaluation after the last resize: only the two-rank steps' order of float additions
  // differs (the all-reduce sums two halves): 1e-9 in the parameters a step after the resize, but
  // Adam's early, nearly sign-like updates grow it about 1.7x a step, so the bound depends on how
  // far the evaluation comes after the resize: 0.1% within 16 steps; replayed by hand, 61-64 steps
  // later it was 0.19-0.81% off (docs/scheduler/elastic.md), hence 2% beyond.
  size_t first = 0;
  while (first + 1 < got.size() && got[first].at("step") <= runs[1].stop_step) ++first;
  const double after = got[first].at("step") - static_cast<double>(runs[1].stop_step);
  EXPECT_NEAR(got[first].at("test_loss"), want[first].at("test_loss"),
              (after <= 16 ? 1e-3 : 0.02) * want[first].at("test_loss"))
      << after << " steps after the last resize\n"
      << both;
  // At the end of the run: those differences grow with every step (Adam amplifies them); in six
  // repeated runs of this test the final test loss differed by 0.06-0.74%, hence these bounds.
  const auto& g = got.back();
  const auto& w = want.back();
  std::printf("test loss relative difference: %.3g after the last resize, %.3g at the end\n",
              std::abs(got[first].at("test_loss") / want[first].at("test_loss") - 1),
              std::abs(g.at("test_loss") / w.at("test_loss") - 1));
  EXPECT_NEAR(g.at("test_loss"), w.at("test_loss"), 0.03 * w.at("test_loss")) << both << log;
  EXPECT_NEAR(g.at("test_acc"), w.at("test_acc"), 0.02) << both;
}

TEST_F(DaemonTest, AnElasticJobIsResizedOneTwoOneThroughItsCheckpoint) {
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--elastic-restart", "0"});
  JobSpec s;
  s.set_name("elastic");
  s.set_command(EMBER_EXE);
  for (const char* a : {"launch", "--rank0-only", "--", MNIST_CNN_EXE, "--data-parallel", "--reshard"}) s.add_args(a);
  for (const std::string& a : mnist_args(dir_ + "/ckpt")) s.add_args(a);
  s.mutable_elastic()->set_min(1);
  s.mutable_elastic()->set_max(2);
  (*s.mutable_env())["OMP_WAIT_POLICY"] = "PASSIVE";
  s.set_workdir(EMBER_SOURCE_DIR);
  const int64_t id = submit(s);
  ASSERT_EQ(id, 1);
  // Grown to two ranks, and its noise scale (measured on two ranks only) has reached the daemon.
  JobInfo two;
  ASSERT_TRUE(wait_for(
      [&] {
        two = job(id);
        return two.devices_size() == 2 && two.progress().has_noise_scale() && two.progress().has_steps_per_s();
      },
      240))
      << log_of(id) << read_file(dir_ + "/daemon.out");
  EXPECT_EQ(two.attempts(), 2);
  EXPECT_GT(two.progress().noise_scale(), 0);
  EXPECT_GT(two.progress().steps_per_s(), 0);
  ASSERT_TRUE(two.progress().has_sync_s()) << "two ranks report their wait for the gradients";
  EXPECT_GE(two.progress().sync_s(), 0);
  EXPECT_LT(two.progress().sync_s(), 1 / two.progress().steps_per_s()) << "a wait longer than its step";
  EXPECT_EQ(two.progress().batch(), 64) << "two ranks of the first run's 32 each";
  // A rigid job needs a device: the goodput allocator gives it one, and the elastic job shrinks.
  const int64_t rigid = submit(gated("rigid", 1, "gate"));
  ASSERT_TRUE(wait_for([&] { return job(id).attempts() == 3 && job(id).devices_size() == 1; }, 120))
      << log_of(id) << read_file(dir_ + "/daemon.out");
  ASSERT_TRUE(wait_for([&] { return finished(id); }, 400)) << log_of(id);
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(rigid); }));
  const JobInfo done = job(id);
  EXPECT_EQ(done.state(), ember::proto::DONE) << done.reason() << log_of(id);
  EXPECT_EQ(done.attempts(), 3);
  EXPECT_EQ(done.preemptions(), 2);
  const std::string log = log_of(id), out = read_file(dir_ + "/daemon.out");
  // Each run resumes at the step the one before it stopped at.
  const std::vector<Attempt> runs = attempts_of(log, out);
  ASSERT_EQ(runs.size(), 3u) << log;
  for (size_t i = 1; i < runs.size(); ++i) {
    ASSERT_GT(runs[i - 1].stop_step, 0) << log;
    EXPECT_NE(log.find("at step " + std::to_string(runs[i - 1].stop_step) + " ("), std::string::npos)
        << "run " << i + 1 << " does not resume at step " << runs[i - 1].stop_step << "\n"
        << log;
  }
  EXPECT_EQ(runs[1].batch, 64);
  EXPECT_EQ(runs[2].batch, 32);
  EXPECT_EQ(runs[2].lr_scale, "1");
  // The learning rate the optimiser got back on each resume: --lr times the daemon's factor.
  for (size_t i = 1; i < runs.size(); ++i) {
    char want[64];
    std::snprintf(want, sizeof want, "Elastic: learning rate %g\n", kLr * std::stod(runs[i].lr_scale));
    EXPECT_NE(log.find(want), std::string::npos) << "run " << i + 1 << " has no '" << want << "'\n" << log;
  }
  expect_one_process_agrees(runs, dir_, log);
}

}  // namespace
}  // namespace daemon_test

#endif  // MNIST_CNN_EXE

namespace daemon_test {
namespace {

TEST_F(DaemonTest, BadElasticValuesAreRefusedNamingTheFlag) {
  start_daemon({"--devices", "cpu:2"});
  for (const char* bad : {"0:2", "2:1", "one:2", "1:x", "2"}) {
    Result r = cli({"submit", "--elastic", bad, "--", "/bin/true"});
    EXPECT_EQ(r.status, 1) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--elastic"), std::string::npos) << r.out;
  }
  Result rigid = cli({"submit", "--max-batch", "64", "--", "/bin/true"});
  EXPECT_EQ(rigid.status, 2) << rigid.out;
  EXPECT_NE(rigid.out.find("--max-batch: only for an elastic job"), std::string::npos) << rigid.out;
  for (const char* bad : {"0", "-5", "x"}) {
    Result r = cli({"submit", "--elastic", "1:2", "--max-batch", bad, "--", "/bin/true"});
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--max-batch"), std::string::npos) << r.out;
  }
  EXPECT_EQ(status().jobs_size(), 0) << "nothing was submitted";
  Result ok = cli({"submit", "--elastic", "1:2", "--max-batch", "256", "--", "/bin/true"});
  EXPECT_EQ(ok.status, 0) << ok.out;
}

// A stand-in elastic job: prints the size, batch and learning-rate factor each run got, then a
// progress report every 0.1 s, its step count carried across runs in a file; SIGTERM ends a run
// (a preemption), the file `done` the job. On one device 10 steps/s; on two 0.15 s a step of which
// 0.05 s waiting for gradients, noise scale 96 (the hand values of LiveJob's tests: the best batch
// on two devices is 56, at learning rate x 1.4737), or `noise_scale`.
JobSpec reporting_elastic_job(const std::string& dir, const std::string& noise_scale = "96") {
  JobSpec s;
  s.set_name("elastic");
  s.set_command("/bin/sh");
  s.add_args("-c");
  s.add_args("d=" + dir + R"(; r=${EMBER_ELASTIC_RANKS:-1}; b=${EMBER_ELASTIC_BATCH:-$((32 * r))}
a=${EMBER_ELASTIC_ACCUMULATE:-none}
echo "elastic run: ranks=$r batch=${EMBER_ELASTIC_BATCH:-none} lr=${EMBER_ELASTIC_LR_SCALE:-none} acc=$a"
trap 'exit 143' TERM
n=$(cat $d/step 2>/dev/null || echo 0)
rate='steps_per_s=10'; [ $r -ge 2 ] && rate='steps_per_s=6.666667 sync_s=0.05 noise_scale=)" +
             noise_scale + R"('
while [ ! -e $d/done ]; do
  [ -d $d ] || exit 9
  n=$((n + 1)); echo $n > $d/step
  echo "ember-progress epoch=1 step=$n batch=$b $rate"; sleep 0.1
done)");
  s.mutable_elastic()->set_min(1);
  s.mutable_elastic()->set_max(2);
  s.set_workdir(dir);
  return s;
}

// The stand-in elastic job's runs, driven by a rigid job as the allocator would have it.
class ElasticDaemonTest : public DaemonTest {
 protected:
  // Until job `id` runs on two devices and its noise scale (measured on two only) has arrived.
  void wait_on_two_with_noise(int64_t id) {
    ASSERT_TRUE(wait_for([&] {
      const JobInfo j = job(id);
      return j.devices_size() == 2 && j.progress().has_noise_scale();
    })) << log_of(id)
        << read_file(dir_ + "/daemon.out");
  }
  // A rigid job of one device shrinks job `id` to one device (its third run); when the rigid job
  // ends, `id` grows back (its fourth) and is then told to finish. `log`: id's log then.
  void shrink_regrow_and_finish(int64_t id, std::string& log) {
    const int64_t rigid = submit(gated("rigid", 1, "gate"));
    ASSERT_TRUE(wait_for([&] { return job(id).attempts() == 3; })) << log_of(id) << read_file(dir_ + "/daemon.out");
    write_file(dir_ + "/gate", "");
    ASSERT_TRUE(wait_for([&] { return finished(rigid) && job(id).attempts() == 4; }))
        << log_of(id) << read_file(dir_ + "/daemon.out");
    write_file(dir_ + "/done", "");
    ASSERT_TRUE(wait_for([&] { return finished(id); })) << log_of(id);
    EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
    log = log_of(id);
  }
};

// Each of `runs` ("ranks=2 batch=56 ...") is the start of a line "elastic run: ..." of `log`.
void expect_runs(const std::string& log, std::initializer_list<const char*> runs) {
  for (const char* run : runs)
    EXPECT_NE(log.find(std::string("elastic run: ") + run), std::string::npos) << "no run with " << run << "\n" << log;
}

// What the daemon learned of an elastic job survives the daemon, and the batch on two devices is
// the one of most goodput. Killed while the job runs on two devices (grown there from one, its
// noise scale measured), the next daemon re-adopts it and, when a rigid job takes a device,
// shrinks it back to the first run's batch and learning rate (a daemon that learned anew from the
// two-device run would take 64 for the initial batch: x 0.625 on one device); when the rigid job
// ends, the job grows again, now at batch 56, not the 64 of two first-run devices.
TEST_F(ElasticDaemonTest, AnElasticJobKeepsItsModelAcrossADaemonRestartAndGrowsAtItsBestBatch) {
  const std::vector<std::string> flags = {"--devices", "cpu:2", "--policy", "fcfs", "--elastic-restart", "0"};
  start_daemon(flags);
  const int64_t id = submit(reporting_elastic_job(dir_));
  ASSERT_NO_FATAL_FAILURE(wait_on_two_with_noise(id));
  kill_daemon();
  start_daemon(flags);
  const JobInfo readopted = job(id);
  EXPECT_EQ(readopted.state(), ember::proto::RUNNING) << readopted.reason();
  EXPECT_EQ(readopted.elastic_learned().init_batch(), 32);
  EXPECT_EQ(readopted.elastic_learned().most_held(), 2);
  std::string log;
  ASSERT_NO_FATAL_FAILURE(shrink_regrow_and_finish(id, log));
  expect_runs(log, {"ranks=1 batch=none lr=none acc=none\n", "ranks=2 batch=64 lr=2 acc=none\n",
                    "ranks=1 batch=32 lr=1 acc=none\n", "ranks=2 batch=56 lr=1.47368"});
}

// Given a max_batch, the daemon accumulates gradients above what the devices held. The stand-in's
// noise scale on two devices is 3200 (LiveJob's hand values: the best batch on two devices is 320,
// five passes of the 64 two first-run devices held, at learning rate x 9.1818): grown to two
// devices (batch 64, no noise scale yet), shrunk to one by a rigid job, grown again when it ends,
// the last run is told batch 320 in EMBER_ELASTIC_ACCUMULATE=5 passes; no earlier run is told any.
TEST_F(ElasticDaemonTest, AnElasticJobWithAMaxBatchAccumulatesAboveWhatItsDevicesHeld) {
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--elastic-restart", "0"});
  JobSpec spec = reporting_elastic_job(dir_, "3200");
  spec.mutable_elastic()->set_max_batch(1000);
  const int64_t id = submit(spec);
  ASSERT_NO_FATAL_FAILURE(wait_on_two_with_noise(id));
  std::string log;
  ASSERT_NO_FATAL_FAILURE(shrink_regrow_and_finish(id, log));
  expect_runs(log, {"ranks=1 batch=none lr=none acc=none\n", "ranks=2 batch=64 lr=2 acc=none\n",
                    "ranks=1 batch=32 lr=1 acc=none\n", "ranks=2 batch=320 lr=9.18181818"});
  EXPECT_NE(log.find(" acc=5\n"), std::string::npos) << log;
  EXPECT_NE(read_file(dir_ + "/daemon.out").find("global batch 320 in 5 accumulated passes"), std::string::npos)
      << read_file(dir_ + "/daemon.out");
}

// A stand-in job whose run, when stopped, prints one last report with an absurd rate (1,000
// steps/s) after the daemon's last look, as a trainer may between that look and its exit; a run on
// two devices says nothing until the file `speak` exists, then 5 steps/s at its batch.
JobSpec late_reporting_elastic_job(const std::string& dir) {
  JobSpec s = reporting_elastic_job(dir);
  s.set_args(1, "d=" + dir + R"(; r=${EMBER_ELASTIC_RANKS:-1}; b=${EMBER_ELASTIC_BATCH:-$((32 * r))}
n=$(cat $d/step 2>/dev/null || echo 0)
trap 'n=$((n + 1)); echo $n > $d/step; echo "ember-progress epoch=1 step=$n batch=$b steps_per_s=1000"; exit 143' TERM
if [ $r -ge 2 ]; then
  while [ ! -e $d/speak ]; do [ -d $d ] || exit 9; sleep 0.05; done
fi
while [ ! -e $d/done ]; do
  [ -d $d ] || exit 9
  n=$((n + 1)); echo $n > $d/step
  if [ $r -ge 2 ]; then rate='steps_per_s=5 noise_scale=96'; else rate='steps_per_s=10'; fi
  echo "ember-progress epoch=1 step=$n batch=$b $rate"; sleep 0.1
done)");
  return s;
}

bool measured_on(const JobInfo& j, int devices) {
  for (const ember::proto::ElasticMeasured& m : j.elastic_learned().measured())
    if (m.devices() == devices) return true;
  return false;
}

// A report the previous run printed after the daemon last looked is that run's, not the next
// one's: while the run on two devices is silent, the daemon learns nothing for two devices (a
// daemon that took the stale line would record 1,000 steps/s there within its first look, once a
// second; three seconds are allowed). Once the run speaks, its own rate is recorded.
TEST_F(DaemonTest, AReportTheStoppedRunPrintedLateIsNotTakenForTheNextSize) {
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs", "--elastic-restart", "0"});
  const int64_t id = submit(late_reporting_elastic_job(dir_));
  ASSERT_TRUE(wait_for([&] {
    const JobInfo j = job(id);
    return j.attempts() == 2 && j.state() == ember::proto::RUNNING;
  })) << log_of(id)
      << read_file(dir_ + "/daemon.out");
  EXPECT_FALSE(wait_for([&] { return measured_on(job(id), 2); }, 3))
      << "the stopped run's last line was taken for two devices\n"
      << log_of(id);
  write_file(dir_ + "/speak", "");
  ASSERT_TRUE(wait_for([&] { return measured_on(job(id), 2); })) << log_of(id);
  const JobInfo two = job(id);
  for (const ember::proto::ElasticMeasured& m : two.elastic_learned().measured())
    if (m.devices() == 2) {
      EXPECT_EQ(m.batch(), 64);
      EXPECT_NEAR(m.step_s(), 0.2, 1e-9) << "the two-device run's 5 steps/s";
    }
  write_file(dir_ + "/done", "");
  ASSERT_TRUE(wait_for([&] { return finished(id); })) << log_of(id);
  EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
}

}  // namespace
}  // namespace daemon_test
