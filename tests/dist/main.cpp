// The distributed suites run under mpirun: every rank runs every test, and the tests' collectives
// pair up across ranks. Only rank 0 prints gtest's progress; a failure on any rank fails the run
// (the rank exits non-zero and mpirun reports it).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "dist/comm_mpi.h"
#include "dist_test_util.h"

namespace dist_test {
namespace {
std::unique_ptr<ember::dist::MpiCommunicator> g_comm;
}
ember::dist::Communicator& comm() {
  return *g_comm;
}

std::vector<double> gather(double v) {
  using namespace ember;
  Tensor in = empty({1}, {.dtype = DType::Float64});
  in.data_ptr<double>()[0] = v;
  Tensor out = empty({comm().size()}, {.dtype = DType::Float64});
  comm().all_gather(out, in, "test gather")->wait();
  return out.to_vector<double>();
}
}  // namespace dist_test

namespace {
// Ranks other than 0 print only their failures, with the rank, so that a failure seen by one
// rank alone is not a bare non-zero exit in ctest's log.
class RankFailures : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailures(int rank) : rank_(rank) {}
  // The name is kept here: asking gtest for the current test inside OnTestPartResult would take
  // the lock that gtest holds while it reports the result.
  void OnTestStart(const ::testing::TestInfo& t) override { test_ = std::string(t.test_suite_name()) + "." + t.name(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", rank_, test_.c_str(), r.file_name() ? r.file_name() : "?",
                 r.line_number(), r.message());
  }

 private:
  int rank_;
  std::string test_ = "(no test)";
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist_test::g_comm = std::make_unique<ember::dist::MpiCommunicator>();
  if (dist_test::g_comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailures(dist_test::g_comm->rank()));
  }
  int rc = RUN_ALL_TESTS();
  // A failure on one rank must fail the job even when rank 0 passed.
  std::vector<double> all = dist_test::gather(rc);
  int worst = 0;
  for (double r : all)
    if (r != 0) worst = 1;
  dist_test::g_comm.reset();
  return worst;
}
