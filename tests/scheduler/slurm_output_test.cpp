// The Slurm backend's reading of sinfo, sbatch, scontrol and squeue output (slurm_output.h), on
// the forms Slurm prints and on numbers past what int and int64 hold, which std::stoi and
// std::stoll turned into std::out_of_range and std::atoi into undefined behaviour.
#include "scheduler/daemon/slurm_output.h"

#include <gtest/gtest.h>

#include "test_helpers.h"

using namespace ember::sched;
using test_util::expect_error;

TEST(SlurmOutput, SinfoGivesGpusOrCpusPerNodeOnce) {
  const Pool p = parse_sinfo(
      "n1|64|gpu:4\nn2|64|gpu:a100:2(S:0-1),mps:100\nn1|64|gpu:4\nc1|8+|(null)\nc2|N/A|\nbroken line\n", "");
  ASSERT_EQ(p.devices.size(), 4u + 2u + 8u + 1u);
  EXPECT_EQ(p.devices[0].name, "n1/gpu0");
  EXPECT_EQ(p.devices[3].cuda_index, 3);
  EXPECT_EQ(p.devices[5].name, "n2/gpu1");
  EXPECT_EQ(p.devices[6].name, "c1/cpu0");
  EXPECT_EQ(p.devices[6].cuda_index, -1);
  EXPECT_EQ(p.devices.back().name, "c2/cpu0");
  expect_error([] { (void)parse_sinfo("n|8|gpu:99999999999\n", ""); }, "sinfo line 1 (node n)",
               "counts 99999999999 GPUs, expected at most 4096");
  expect_error([] { (void)parse_sinfo("a|1|\nn|99999999999|\n", ""); }, "sinfo line 2 (node n)",
               "99999999999 CPUs, expected at most 4096");
  expect_error([] { (void)parse_sinfo("n|8|gpu:4096,gpu:1\n", ""); }, "counts 4097 GPUs");
  std::string many;
  for (int i = 0; i < 17; ++i) many += "n" + std::to_string(i) + "|4096|\n";
  expect_error([&] { (void)parse_sinfo(many, ""); }, "sinfo line 17", "more than 65536 devices");
  expect_error([] { (void)parse_sinfo("\n", "gpu"); }, "sinfo lists no node in partition gpu");
}

TEST(SlurmOutput, SbatchAndSqueueIds) {
  EXPECT_EQ(parse_sbatch_id("1234\n"), 1234);
  EXPECT_EQ(parse_sbatch_id("1234;cluster\n"), 1234);
  EXPECT_FALSE(parse_sbatch_id("sbatch: error: Batch job submission failed\n"));
  EXPECT_FALSE(parse_sbatch_id("99999999999999999999\n"));
  EXPECT_FALSE(parse_sbatch_id("-5\n"));
  EXPECT_EQ(parse_squeue_newest("17\n123\n99\n"), 123);
  EXPECT_EQ(parse_squeue_newest("99999999999999999999\n5\n"), 5);
  EXPECT_FALSE(parse_squeue_newest("JOBID\n\n"));
}

TEST(SlurmOutput, ScontrolStateAndExitCode) {
  SlurmJob j = parse_scontrol_job("JobId=42 JobState=COMPLETED Reason=None ExitCode=0:0 RunTime=00:00:03\n");
  EXPECT_TRUE(j.known && j.ended);
  EXPECT_EQ(j.state, "COMPLETED");
  EXPECT_EQ(j.reason, "None");
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(parse_scontrol_job("JobState=CANCELLED ExitCode=0:15").exit_code, 128 + 15);
  EXPECT_EQ(parse_scontrol_job("JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0\n").exit_code, 3);
  // The last field ends at the line's end, not with its newline.
  EXPECT_EQ(parse_scontrol_job("JobId=1 JobState=TIMEOUT\n").state, "TIMEOUT");
  j = parse_scontrol_job("JobState=RUNNING Reason=None ExitCode=0:0\n");
  EXPECT_FALSE(j.ended);
  EXPECT_FALSE(j.exit_code);
  EXPECT_EQ(parse_scontrol_job("JobState=NODE_FAIL ExitCode=99999999999:99999999999\n").exit_code, 255);
}
