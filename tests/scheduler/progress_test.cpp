// Jobs' progress reports (scheduler/daemon/progress.h): the line a trainer prints, found at the end
// of a log among other output, and anything else in a log ignored, never an error.
#include "scheduler/daemon/progress.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using ember::sched::latest_progress;
using ember::sched::parse_progress_line;

namespace {

TEST(Progress, ParsesAReport) {
  auto p = parse_progress_line("ember-progress epoch=3 epochs=10 step=1200 loss=0.4123 samples_per_s=5230.5");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->epoch(), 3);
  EXPECT_EQ(p->epochs(), 10);
  EXPECT_EQ(p->step(), 1200);
  EXPECT_DOUBLE_EQ(p->loss(), 0.4123);
  EXPECT_DOUBLE_EQ(p->samples_per_s(), 5230.5);
  auto minimal = parse_progress_line("ember-progress step=7 epoch=1\r");
  ASSERT_TRUE(minimal);
  EXPECT_FALSE(minimal->has_loss());
  EXPECT_FALSE(minimal->has_samples_per_s());
  EXPECT_EQ(minimal->step(), 7);
}

// An elastic job's report, as rank 0 prints it under `ember launch`.
TEST(Progress, ParsesAnElasticJobsReportFromRankZero) {
  auto p = parse_progress_line(
      "[rank 0] ember-progress epoch=2 epochs=6 step=70 loss=0.5 samples_per_s=1200 batch=64 steps_per_s=20.5 "
      "noise_scale=153.25 sync_s=0.0125");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->step(), 70);
  EXPECT_EQ(p->batch(), 64);
  EXPECT_DOUBLE_EQ(p->steps_per_s(), 20.5);
  EXPECT_DOUBLE_EQ(p->noise_scale(), 153.25);
  EXPECT_DOUBLE_EQ(p->sync_s(), 0.0125);
  for (const char* line : {"[rank 1] ember-progress epoch=1 step=2", "ember-progress epoch=1 step=2 batch=0",
                           "ember-progress epoch=1 step=2 batch=1.5", "ember-progress epoch=1 step=2 noise_scale=-1",
                           "ember-progress epoch=1 step=2 sync_s=-0.1", "ember-progress epoch=1 step=2 sync_s=x"})
    EXPECT_FALSE(parse_progress_line(line)) << line;
}

TEST(Progress, IgnoresLinesThatAreNotReports) {
  for (const char* line : {"", "epoch 3/10 loss 0.4", "ember-progress", "ember-progress epoch=1",
                           "ember-progress epoch=1 step=2 loss=nan", "ember-progress epoch=1 step=2 loss=inf",
                           "ember-progress epoch=-1 step=2", "ember-progress epoch=1 step=2 speed=3",
                           "ember-progress epoch=1 step=2x", "ember-progress epoch=1 step=2 samples_per_s=-1",
                           "ember-progress epoch=1 step=99999999999999999999", " ember-progress epoch=1 step=2"})
    EXPECT_FALSE(parse_progress_line(line)) << line;
}

TEST(Progress, TheLatestCompleteReportOfALogWins) {
  const std::string log =
      "=== ember sched: job 1 attempt 1 on cpu0 ===\n"
      "ember-progress epoch=1 step=10 loss=2.5\n"
      "epoch 1/2 10/10 loss 2.5 | 100 samples/s\n"
      "ember-progress epoch=2 step=20 loss=1.5\n"
      "ember-progress epoch=2 step=25 loss=oops\n"
      "some output\n"
      "ember-progress epoch=2 step=30 lo";  // being written: not complete yet
  auto p = latest_progress(log);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->step(), 20);
  EXPECT_FALSE(latest_progress("no reports here\n"));
  EXPECT_FALSE(latest_progress(""));
  // Only the tail is read: a report further back than kProgressTailBytes is not found.
  const std::string far = "ember-progress epoch=1 step=1\n" + std::string(ember::sched::kProgressTailBytes, 'x') + "\n";
  EXPECT_FALSE(latest_progress(far));
}

TEST(Progress, TheReaderFollowsAGrowingLog) {
  const std::string path = std::filesystem::temp_directory_path() / ("progress-test-" + std::to_string(::getpid()));
  ember::sched::ProgressReader reader;
  EXPECT_FALSE(reader.read(path));  // no log yet
  std::ofstream(path) << "ember-progress epoch=1 step=5\n";
  ASSERT_TRUE(reader.read(path));
  EXPECT_EQ(reader.read(path)->step(), 5);
  std::ofstream(path, std::ios::app) << "ember-progress epoch=1 step=12 loss=0.5\n";
  ASSERT_TRUE(reader.read(path));
  EXPECT_EQ(reader.read(path)->step(), 12);
  std::filesystem::remove(path);
}

}  // namespace
