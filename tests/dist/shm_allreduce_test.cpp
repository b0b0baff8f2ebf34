// The shared-memory all-reduce protocol (dist/shm_allreduce.h) with threads standing in
// for ranks over one segment: every dtype and op against a serial reference, tensors of many
// rounds through tiny slots, bitwise-equal results on every rank, a mismatch failing every rank
// and leaving them in step. These run in each MPI rank of the suite but use no MPI; the MPI
// communicator's own all_reduce over the same code is tested in comm_test.cpp.
#include "dist/shm_allreduce.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "dist_test_util.h"

using namespace ember;
using namespace ember::dist;

namespace {

// Runs `ranks` threads, each with its own ShmAllReduce over one zeroed segment; `body(rank, run)`
// performs its rank's all-reduces through `run`, which drives a job to its end the way the
// communication thread does: step, and sleep on the doorbell when a step moved nothing.
void with_ranks(int ranks, size_t slot,
                const std::function<void(int, const std::function<void(ShmAllReduce::Job&)>&)>& body,
                double spin_s = 0) {
  std::vector<char> seg(ShmAllReduce::bytes_needed(ranks, slot) + 64, 0);
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r)
    th.emplace_back([&, r] {
      ShmAllReduce shm(seg.data() + 3, r, ranks, slot);  // a misaligned start, as MPI may give
      body(r, [&](ShmAllReduce::Job& job) {
        for (;;) {
          uint32_t seen = shm.doorbell();
          const bool moved = shm.step(job);
          if (job.finished) return;
          if (moved) continue;
          // Long on purpose: a lost wake-up shows as a stall of 30 s per occurrence (the stress
          // test below would then run past ctest's time limit), not as a slow pass.
          shm.wait_for_doorbell(seen, 30.0, r % 2 ? spin_s : 0.0);
        }
      });
    });
  for (auto& t : th) t.join();
}

double value(int r, int64_t i, DType dt) {
  if (dt == DType::Bool) return ((r * 7 + i * 3) % 5) == 0 ? 1 : 0;
  if (dt == DType::UInt8) return static_cast<double>((r * 11 + i * 5) % 40);
  return static_cast<double>(((r + 1) * 13 + i * 7) % 29) - 10.0;
}

Tensor make(int r, int64_t n, DType dt) {
  Tensor t = empty({n}, {.dtype = DType::Float64});
  for (int64_t i = 0; i < n; ++i) t.data_ptr<double>()[i] = value(r, i, dt);
  return t.to(dt);
}

}  // namespace

TEST(ShmAllReduce, EveryDtypeAndOpOverManyRounds) {
  const DType all[] = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                       DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  for (int ranks : {1, 2, 3, 4})
    for (size_t slot : {size_t{64}, size_t{4096}}) {  // 64 bytes: 8 to 64 elements a round
      std::vector<std::vector<Tensor>> got(static_cast<size_t>(ranks));
      std::vector<std::string> cases;
      for (DType dt : all)
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}})
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
            if (op != ReduceOp::Avg || is_floating(dt))
              cases.push_back(std::string(dtype_name(dt)) + "/" + std::to_string(n) + "/" + reduce_op_name(op));
      with_ranks(ranks, slot, [&](int r, const auto& run) {
        for (DType dt : all)
          for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}})
            for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
              if (op == ReduceOp::Avg && !is_floating(dt)) continue;
              ShmAllReduce::Job job;
              job.t = make(r, n, dt);
              job.op = op;
              run(job);
              EXPECT_FALSE(job.error);  // not ASSERT: a rank that stopped would leave the others waiting
              got[static_cast<size_t>(r)].push_back(job.t);
            }
      });
      size_t c = 0;
      for (DType dt : all)
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}})
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
            if (op == ReduceOp::Avg && !is_floating(dt)) continue;
            const std::string what = cases[c] + " on " + std::to_string(ranks) + " ranks, slot " + std::to_string(slot);
            std::vector<double> g0 = got[0][c].to(DType::Float64).to_vector<double>();
            ASSERT_EQ(static_cast<int64_t>(g0.size()), n) << what;
            for (int64_t i = 0; i < n; ++i) {
              double s = 0, m = -1e300;
              for (int r = 0; r < ranks; ++r) {
                s += value(r, i, dt);
                m = std::max(m, value(r, i, dt));
              }
              double want = dt == DType::Bool || op == ReduceOp::Max ? m : op == ReduceOp::Avg ? s / ranks : s;
              if (dt == DType::UInt8) want = std::fmod(want, 256.0);
              double tol = dt == DType::Float16 || dt == DType::BFloat16 ? 0.02 * std::max(1.0, std::abs(want)) : 1e-6;
              ASSERT_NEAR(g0[static_cast<size_t>(i)], want, tol) << what << " element " << i;
            }
            // Every rank holds the same bytes, not merely close values.
            for (int r = 1; r < ranks; ++r)
              ASSERT_EQ(std::memcmp(got[static_cast<size_t>(r)][c].raw_data(), got[0][c].raw_data(),
                                    static_cast<size_t>(n) * got[0][c].itemsize()),
                        0)
                  << what << ": rank " << r << " differs from rank 0";
            ++c;
          }
    }
}

// The ranks pass floats whose sum depends on the order of addition: the result must be the fold in
// rank order, on every rank.
TEST(ShmAllReduce, FloatSumsFoldInRankOrder) {
  const float x[3] = {1e8f, 1.0f, -1e8f};
  with_ranks(3, 64, [&](int r, const auto& run) {
    ShmAllReduce::Job job;
    job.t = full({33}, x[r], {.dtype = DType::Float32});
    run(job);
    // 0 in float: the 1 is lost in the first addition. Adding rank 2's before rank 1's gives 1.
    float want = (x[0] + x[1]) + x[2];
    for (float v : job.t.to_vector<float>()) ASSERT_EQ(v, want) << "rank " << r;
  });
}

// A rank that contributes another size, dtype or op fails the operation on every rank with both
// descriptions; the next all-reduce then works.
TEST(ShmAllReduce, DisagreeingRanksAllFailAndStayInStep) {
  with_ranks(3, 64, [&](int r, const auto& run) {
    ShmAllReduce::Job bad;
    bad.what = "all_reduce 'probe'";
    bad.t = r == 2 ? full({100}, 1.0, {.dtype = DType::Float32}) : full({10}, 1.0, {.dtype = DType::Float32});
    run(bad);
    EXPECT_TRUE(bad.error) << "rank " << r;
    std::string msg;
    try {
      if (bad.error) std::rethrow_exception(bad.error);
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("all_reduce 'probe': the ranks disagree"), std::string::npos) << msg;
    EXPECT_NE(msg.find(r == 2 ? "has 10 float32 elements (sum), this rank (2) has 100" : "rank 2 has 100 float32"),
              std::string::npos)
        << msg;

    ShmAllReduce::Job dtype_bad;
    dtype_bad.t = full({4}, 1.0, {.dtype = r == 0 ? DType::Float64 : DType::Float32});
    run(dtype_bad);
    EXPECT_TRUE(dtype_bad.error) << "rank " << r;

    ShmAllReduce::Job good;
    good.t = full({500}, static_cast<double>(r), {.dtype = DType::Float64});
    run(good);
    EXPECT_FALSE(good.error);
    for (double v : good.t.to_vector<double>()) ASSERT_EQ(v, 3.0) << "rank " << r;
  });
}

// Many operations of random sizes (from empty to many rounds) back to back on 4 ranks, each rank
// checking every result: the sleeps and wake-ups of thousands of rounds, where one lost wake-up
// would stall the run (see with_ranks). Twice: the second time the odd ranks watch their doorbell
// for a while before sleeping, as the communication thread does while its caller waits (their
// peers then skip the wake-up call).
class ShmAllReduceSpin : public ::testing::TestWithParam<double> {};
INSTANTIATE_TEST_SUITE_P(SleepOrSpin, ShmAllReduceSpin, ::testing::Values(0.0, 1e-4));
TEST_P(ShmAllReduceSpin, ThousandsOfRoundsInARow) {
  with_ranks(
      4, 64,
      [&](int r, const auto& run) {
        std::mt19937 sizes(7);  // the same sequence on every rank
        for (int k = 0; k < 1500; ++k) {
          const int64_t n = std::uniform_int_distribution<int64_t>(0, 40)(sizes);
          ShmAllReduce::Job job;
          job.t = full({n}, static_cast<double>(r + k), {.dtype = DType::Int64});
          run(job);
          EXPECT_FALSE(job.error);
          for (int64_t v : job.t.to_vector<int64_t>()) ASSERT_EQ(v, 6 + 4 * k) << "operation " << k << ", rank " << r;
        }
      },
      GetParam());
}

// wait_for_doorbell returns at once when the bell rang after `seen` was read, and otherwise sleeps
// (here until its timeout).
TEST(ShmAllReduce, TheDoorbellWaitSeesARingThatCameFirst) {
  std::vector<char> seg(ShmAllReduce::bytes_needed(1, 64), 0);
  ShmAllReduce shm(seg.data(), 0, 1, 64);
  uint32_t seen = shm.doorbell();
  shm.ring_self();
  EXPECT_NE(shm.doorbell(), seen);
  shm.wait_for_doorbell(seen, 60.0);  // would hang for a minute if it missed the ring
  seen = shm.doorbell();
  shm.wait_for_doorbell(seen, 0.01);
  EXPECT_EQ(shm.doorbell(), seen);
}
