// The GPU check's DDP overlap timing (tests/gpu/ddp_overlap_timing.h, `ember_gpu_nccl_tests
// --ddp-overlap` on a lent GPU) run on real MPI ranks on the CPU, where CI can: data-parallel
// MnistCnn with the bucketed all-reduce overlapped and not, both trained, and rank 0 printing the
// two rows scripts/gpu-check.sh reads ("ddp overlap: <name> <ms> ms [...]", its sed expression
// below). Nothing about the times is asserted: they are a measurement, this only shows it runs.
#include "gpu/ddp_overlap_timing.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "dist_test_util.h"

namespace {

TEST(DdpOverlapTiming, RunsOnCpuRanksAndPrintsTheRowsTheGpuCheckReads) {
  ember::dist::Communicator& c = dist_test::comm();
  testing::internal::CaptureStdout();
  gpu_test::time_ddp_overlap(c, /*rounds=*/1, /*steps=*/1);
  const std::string out = testing::internal::GetCapturedStdout();
  if (c.rank() != 0) {
    EXPECT_EQ(out, "") << "only rank 0 prints";
    return;
  }
  // gpu-check: sed -nE 's/^ddp overlap: +([a-z ]+[a-z]) +([0-9.]+ ms).*/\1 \2/p'
  const std::regex row(R"(^ddp overlap: +([a-z ]+[a-z]) +([0-9.]+ ms).*)");
  std::vector<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) names.push_back(m[1]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"overlapped", "not overlapped"})) << out;
  EXPECT_NE(out.find(std::to_string(c.size()) + " ranks on cpu"), std::string::npos) << out;
}

}  // namespace
