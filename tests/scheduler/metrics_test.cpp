// The Prometheus exposition of a daemon snapshot (scheduler/daemon/metrics.h): histogram buckets
// cumulative with +Inf, _sum and _count; label values escaped; per-job series from the jobs' own
// progress reports. (tests/scheduler/web/metrics_check.py parses a live daemon's with Prometheus's
// own parser.)
#include "scheduler/daemon/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace ember::sched;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Metrics, HistogramsAreCumulativeWithInfSumAndCount) {
  DaemonSnapshot s;
  s.policy = "fcfs";
  Histogram h({1, 10});
  for (double v : {0.5, 1.0, 5.0, 50.0}) h.observe(v);
  s.queue_wait.emplace("vision", h);
  ProgressReader reader;
  const std::string m = render_metrics(s, reader, {}, 0);
  EXPECT_TRUE(has_line(m, "# TYPE ember_sched_queue_wait_seconds histogram")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_queue_wait_seconds_bucket{team=\"vision\",le=\"1\"} 2")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_queue_wait_seconds_bucket{team=\"vision\",le=\"10\"} 3")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_queue_wait_seconds_bucket{team=\"vision\",le=\"+Inf\"} 4")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_queue_wait_seconds_sum{team=\"vision\"} 56.5")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_queue_wait_seconds_count{team=\"vision\"} 4")) << m;
}

TEST(Metrics, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prometheus_number(1.0 / 0.0), "+Inf");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  DaemonSnapshot s;
  s.policy = "fcfs";
  s.preemptions["te\"am"] = 3;
  ProgressReader reader;
  EXPECT_TRUE(has_line(render_metrics(s, reader, {}, 0), "ember_sched_preemptions_total{team=\"te\\\"am\"} 3"));
}

TEST(Metrics, DevicesJobsAndProgress) {
  const std::string log = std::filesystem::temp_directory_path() / ("metrics-test-" + std::to_string(::getpid()));
  std::ofstream(log) << "ember-progress epoch=2 epochs=4 step=40 loss=0.5 samples_per_s=123.5\n";
  DaemonSnapshot s;
  s.policy = "fcfs";
  s.devices = {{"cpu0", "cpu", 0, "busy", 7}, {"cpu1", "cpu", 0, "free", -1}};
  ember::proto::JobInfo j;
  j.set_id(7);
  j.mutable_spec()->set_name("mnist");
  j.mutable_spec()->set_queue("vision");
  j.set_state(ember::proto::RUNNING);
  j.set_run_seconds(10);
  j.set_last_start(100);
  s.jobs.push_back(j);
  s.logs[7] = log;
  s.job_counts[{"running", "vision"}] = 1;
  ProgressReader reader;
  const std::string m = render_metrics(s, reader, {{{"/metrics", 200}, 5}}, 105);
  std::filesystem::remove(log);
  EXPECT_TRUE(has_line(m, "ember_sched_devices{state=\"busy\",type=\"cpu\"} 1")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_devices{state=\"stopping\",type=\"cpu\"} 0")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_jobs{state=\"running\",team=\"vision\"} 1")) << m;
  const std::string labels = "{job_id=\"7\",name=\"mnist\",team=\"vision\"}";
  EXPECT_TRUE(has_line(m, "ember_sched_job_samples_per_second" + labels + " 123.5")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_job_epoch" + labels + " 2")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_job_step" + labels + " 40")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_job_loss" + labels + " 0.5")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_job_run_seconds" + labels + " 15")) << m;
  EXPECT_TRUE(has_line(m, "ember_sched_http_requests_total{path=\"/metrics\",code=\"200\"} 5")) << m;
}

}  // namespace
