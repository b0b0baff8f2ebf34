// Every collective of the MPI communicator against a serial reference, for every dtype and for
// odd sizes, with rank-dependent data; point-to-point in a ring; the argument errors.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "dist/comm_mpi.h"
#include "dist_test_util.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using test_util::expect_error;

namespace {

const DType kAll[] = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                      DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
const int64_t kSizes[] = {1, 7, 1001};

// Rank r's element i, small enough to be exact in every dtype and in sums over a few ranks.
double value(int r, int64_t i, DType dt) {
  if (dt == DType::Bool) return ((r * 7 + i * 3) % 5) == 0 ? 1 : 0;
  if (dt == DType::UInt8) return static_cast<double>((r * 11 + i * 5) % 40);
  return static_cast<double>(((r + 1) * 13 + i * 7) % 29) - 10.0;
}

Tensor make(int r, int64_t n, DType dt, int64_t start = 0) {
  Tensor t = empty({n}, {.dtype = DType::Float64});
  for (int64_t i = 0; i < n; ++i) t.data_ptr<double>()[i] = value(r, start + i, dt);
  return t.to(dt);
}

double reduce(const std::vector<double>& v, ReduceOp op, DType dt) {
  double s = 0, m = -1e300;
  for (double x : v) {
    s += x;
    m = std::max(m, x);
  }
  if (dt == DType::Bool) return m;  // bool sum is logical or
  if (op == ReduceOp::Max) return m;
  if (op == ReduceOp::Avg) return s / static_cast<double>(v.size());
  return s;
}

void expect_values(const Tensor& got, const std::vector<double>& want, DType dt, const std::string& what) {
  std::vector<double> g = got.to(DType::Float64).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  double tol = (dt == DType::Float16 || dt == DType::BFloat16) ? 0.02 : 1e-6;
  for (size_t i = 0; i < g.size(); ++i) {
    double w = want[i];
    if (dt == DType::BFloat16 || dt == DType::Float16)
      w = static_cast<float>(dt == DType::Float16 ? float(Half(float(w))) : float(BFloat16(float(w))));
    ASSERT_NEAR(g[i], w, tol * std::max(1.0, std::abs(w))) << what << " element " << i;
  }
}

}  // namespace

TEST(MpiComm, RankSizeAndLocalRank) {
  EXPECT_GE(comm().size(), 2);
  EXPECT_GE(comm().rank(), 0);
  EXPECT_LT(comm().rank(), comm().size());
  EXPECT_GE(comm().local_rank(), 0);
  EXPECT_LT(comm().local_rank(), comm().local_size());
  EXPECT_EQ(comm().backend(), "mpi");
  auto ranks = dist_test::gather(comm().rank());
  for (int r = 0; r < comm().size(); ++r) EXPECT_EQ(ranks[r], r);
}

TEST(MpiComm, AllReduceEveryDtypeAndOp) {
  int n_ranks = comm().size();
  for (DType dt : kAll)
    for (int64_t n : kSizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        if (op == ReduceOp::Avg && !is_floating(dt)) continue;
        Tensor t = make(comm().rank(), n, dt);
        comm().all_reduce(t, op, "test")->wait();
        std::vector<double> want;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> v;
          for (int r = 0; r < n_ranks; ++r) v.push_back(value(r, i, dt));
          want.push_back(reduce(v, op, dt));
        }
        expect_values(t, want, dt, std::string("all_reduce ") + reduce_op_name(op) + " " + dtype_name(dt));
      }
}

TEST(MpiComm, BroadcastFromEveryRoot) {
  for (DType dt : kAll)
    for (int root = 0; root < comm().size(); ++root) {
      Tensor t = make(comm().rank(), 7, dt);
      comm().broadcast(t, root)->wait();
      std::vector<double> want;
      for (int64_t i = 0; i < 7; ++i) want.push_back(value(root, i, dt));
      expect_values(t, want, dt, std::string("broadcast ") + dtype_name(dt));
    }
}

TEST(MpiComm, AllGatherEveryDtype) {
  int k = comm().size();
  for (DType dt : kAll)
    for (int64_t n : kSizes) {
      Tensor in = make(comm().rank(), n, dt);
      Tensor out = empty({n * k}, {.dtype = dt});
      comm().all_gather(out, in)->wait();
      std::vector<double> want;
      for (int r = 0; r < k; ++r)
        for (int64_t i = 0; i < n; ++i) want.push_back(value(r, i, dt));
      expect_values(out, want, dt, std::string("all_gather ") + dtype_name(dt));
    }
}

TEST(MpiComm, ReduceScatterEveryDtype) {
  int k = comm().size();
  for (DType dt : kAll)
    for (int64_t n : kSizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        if (op == ReduceOp::Avg && !is_floating(dt)) continue;
        Tensor in = make(comm().rank(), n * k, dt);
        Tensor out = empty({n}, {.dtype = dt});
        comm().reduce_scatter(out, in, op)->wait();
        std::vector<double> want;
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> v;
          for (int r = 0; r < k; ++r) v.push_back(value(r, comm().rank() * n + i, dt));
          want.push_back(reduce(v, op, dt));
        }
        expect_values(out, want, dt, std::string("reduce_scatter ") + reduce_op_name(op) + " " + dtype_name(dt));
      }
}

TEST(MpiComm, SendRecvRing) {
  int k = comm().size(), r = comm().rank();
  for (DType dt : kAll) {
    Tensor out = make(r, 13, dt);
    Tensor in = empty({13}, {.dtype = dt});
    // Receive first: a ring of sends would be fine too (they are non-blocking), but this order
    // also proves that a pending recv does not block the send behind it.
    auto rw = comm().recv(in, (r + k - 1) % k, 3);
    auto sw = comm().send(out, (r + 1) % k, 3);
    sw->wait();
    rw->wait();
    std::vector<double> want;
    for (int64_t i = 0; i < 13; ++i) want.push_back(value((r + k - 1) % k, i, dt));
    expect_values(in, want, dt, std::string("recv ") + dtype_name(dt));
  }
}

TEST(MpiComm, ManyInFlightWaitedInReverse) {
  std::vector<Tensor> ts;
  std::vector<WorkPtr> ws;
  for (int j = 0; j < 8; ++j) {
    ts.push_back(full({257}, comm().rank() + j, {.dtype = DType::Float32}));
    ws.push_back(comm().all_reduce(ts.back(), ReduceOp::Sum, "bucket " + std::to_string(j)));
  }
  ws.push_back(comm().barrier());
  for (int j = 8; j >= 0; --j) ws[static_cast<size_t>(j)]->wait();
  int k = comm().size();
  for (int j = 0; j < 8; ++j) {
    double want = k * (k - 1) / 2.0 + k * j;
    EXPECT_EQ(ts[static_cast<size_t>(j)].to_vector<float>()[256], want);
    EXPECT_TRUE(ws[static_cast<size_t>(j)]->completed());
    EXPECT_LE(ws[static_cast<size_t>(j)]->started(), ws[static_cast<size_t>(j)]->finished());
  }
}

// Even and odd world ranks form two groups, ranked in reverse: each group's collectives and
// point-to-point transfers stay inside it, interleaved with the world's.
TEST(MpiComm, SplitGroupsCommunicateAmongThemselves) {
  const int k = comm().size(), r = comm().rank();
  auto g = comm().split(r % 2, -r);
  std::vector<int> members;
  for (int q = 0; q < k; ++q)
    if (q % 2 == r % 2) members.push_back(q);
  ASSERT_EQ(g->size(), static_cast<int>(members.size()));
  EXPECT_EQ(g->rank(), static_cast<int>(members.size()) - 1 - r / 2);  // key -r: the highest world rank first
  Tensor mine = full({5}, r, {.dtype = DType::Float64});
  Tensor world = full({5}, r, {.dtype = DType::Float64});
  auto gw = g->all_reduce(mine, ReduceOp::Avg, "group");
  auto ww = comm().all_reduce(world, ReduceOp::Sum, "world");
  gw->wait();
  ww->wait();
  double sum = 0;
  for (int q : members) sum += q;
  EXPECT_EQ(mine.to_vector<double>()[4], sum / static_cast<double>(members.size()));
  EXPECT_EQ(world.to_vector<double>()[4], k * (k - 1) / 2.0);
  Tensor b = full({3}, r, {.dtype = DType::Int64});
  g->broadcast(b, 0, "group root")->wait();
  EXPECT_EQ(b.to_vector<int64_t>()[0], members.back());  // group rank 0 is the highest world rank
  if (g->size() > 1) {                                   // a ring inside the group, in group ranks
    const int n = g->size(), gr = g->rank();
    Tensor in = empty({4}, {.dtype = DType::Float32});
    auto rw = g->recv(in, (gr + n - 1) % n, 5);
    g->send(full({4}, r, {.dtype = DType::Float32}), (gr + 1) % n, 5)->wait();
    rw->wait();
    EXPECT_EQ(in.to_vector<float>()[0], members[members.size() - 1 - static_cast<size_t>((gr + n - 1) % n)]);
  }
  g->barrier("group barrier")->wait();
  EXPECT_TRUE(test_util::has(test_util::error_of([&] { g->send(mine, g->rank(), 0); }), "expected another rank"));
  EXPECT_TRUE(test_util::has(test_util::error_of([&] { g->split(0, 0); }), "split the world communicator"));
  EXPECT_TRUE(test_util::has(test_util::error_of([&] { comm().split(-1, 0); }), "expected a colour >= 0"));
}

TEST(MpiComm, ArgumentErrors) {
  Tensor i32 = zeros({4}, {.dtype = DType::Int32});
  expect_error([&] { comm().all_reduce(i32, ReduceOp::Avg); }, "all_reduce", "floating-point");
  Tensor m = zeros({4, 6});
  expect_error([&] { comm().all_reduce(m.t()); }, "all_reduce", "contiguous");
  expect_error([&] { comm().all_reduce(Tensor()); }, "all_reduce", "defined");
  expect_error([&] { comm().all_gather(zeros({5}), zeros({2})); }, "all_gather", "size() * input");
  expect_error([&] { comm().all_gather(zeros({2 * comm().size()}, {.dtype = DType::Float64}), zeros({2})); },
               "all_gather", "dtype");
  expect_error([&] { comm().reduce_scatter(zeros({2}), zeros({3})); }, "reduce_scatter", "size() * output");
  expect_error([&] { comm().broadcast(zeros({2}), comm().size()); }, "broadcast", "root");
  expect_error([&] { comm().send(zeros({2}), comm().rank()); }, "send", "another rank");
  expect_error([&] { comm().recv(zeros({2}), -1); }, "recv", "another rank");
  expect_error([&] { comm().send(zeros({2}), (comm().rank() + 1) % comm().size(), -4); }, "send", "tag");
}

TEST(MpiComm, RecvOfTheWrongSizeFailsTheWork) {
  int k = comm().size(), r = comm().rank();
  // Ranks 0 and 1 pair up; rank 0 expects 8 floats, rank 1 sends 5.
  if (r == 0) {
    Tensor in = zeros({8});
    std::string msg = test_util::error_of([&] { comm().recv(in, 1, 9)->wait(); });
    EXPECT_TRUE(test_util::has(msg, "expected 32 bytes from rank 1, received 20")) << msg;
  } else if (r == 1) {
    comm().send(ones({5}), 0, 9)->wait();
  }
  (void)k;
  comm().barrier()->wait();
}

TEST(MpiComm, OnlyOneMpiCommunicatorPerProcess) {
  expect_error([] { ember::dist::MpiCommunicator second; }, "MpiCommunicator", "one per process");
  expect_error([] { ember::dist::MpiCommunicator bad({.heartbeat_seconds = 1, .dead_seconds = 0.5}); }, "MpiOptions");
}

// With nothing to do, the communication thread sleeps until work arrives or the heartbeat needs it
// (about twice per heartbeat of 0.5 s), instead of spinning on the rank's core. It once spun for
// the second half of every heartbeat period: hundreds of thousands of passes a second. The bound
// is loose on purpose: what it tells apart is a few passes from a spin.
TEST(MpiComm, AnIdleCommunicatorSleeps) {
  auto& mpi = dynamic_cast<ember::dist::MpiCommunicator&>(comm());
  comm().barrier("idle start")->wait();
  const uint64_t before = mpi.progress_loops();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const uint64_t passes = mpi.progress_loops() - before;
  EXPECT_LT(passes, 200u) << "the communication thread made " << passes << " passes in 1.5 s of idleness";
  comm().barrier("idle end")->wait();
}

// Each rank's host, as a number every rank can compare (its hostname hashed into the 52 bits a
// double holds exactly).
std::vector<double> hosts_of_ranks() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return dist_test::gather(static_cast<double>(std::hash<std::string>{}(name) & ((uint64_t{1} << 52) - 1)));
}

// A rank's node-local rank and size are its place among the ranks on its host (by hostname: on
// one machine every rank shares it; across hosts, such as the network-namespace hosts of
// tests/multinode, each host's ranks count from 0), not among all ranks of the job.
TEST(MpiComm, LocalRanksCountTheRanksOnTheSameHost) {
  std::vector<double> host = hosts_of_ranks();
  const int me = comm().rank();
  int before = 0, same = 0;
  for (int r = 0; r < comm().size(); ++r) {
    same += host[r] == host[me];
    before += r < me && host[r] == host[me];
  }
  EXPECT_EQ(comm().local_rank(), before);
  EXPECT_EQ(comm().local_size(), same);
}

// all_reduce goes through shared memory when every rank runs on one host, unless
// EMBER_MPI_SHM_SLOT_BYTES=0 keeps it on MPI, on every rank if any rank asks (ctest runs the
// suites with it on every rank, on one rank only, and on none); a job over several hosts stays on
// MPI (tests/multinode runs this suite over two).
TEST(MpiComm, AllReduceGoesThroughSharedMemoryOnOneHostUnlessARankSaysNo) {
  auto& mpi = dynamic_cast<ember::dist::MpiCommunicator&>(comm());
  const char* v = std::getenv("EMBER_MPI_SHM_SLOT_BYTES");
  bool any_no = false;
  for (double no : dist_test::gather(v && std::string(v) == "0" ? 1 : 0)) any_no |= no != 0;
  std::vector<double> host = hosts_of_ranks();
  const bool one_host = std::all_of(host.begin(), host.end(), [&](double h) { return h == host[0]; });
  for (double used : dist_test::gather(mpi.shared_memory_all_reduce() ? 1 : 0))
    EXPECT_EQ(used != 0, one_host && !any_no) << (one_host ? "one host" : "several hosts");
}

// MPI leaves a collective whose ranks pass different sizes undefined (it may hang or truncate);
// through shared memory it fails on every rank, naming both sides, and the next one works.
TEST(MpiComm, DisagreeingAllReduceFailsOnEveryRank) {
  auto& mpi = dynamic_cast<ember::dist::MpiCommunicator&>(comm());
  if (!mpi.shared_memory_all_reduce()) GTEST_SKIP() << "all_reduce runs on MPI here";
  Tensor t = ones({comm().rank() == 1 ? 9 : 5});
  std::string msg = test_util::error_of([&] { comm().all_reduce(t, ReduceOp::Sum, "uneven")->wait(); });
  EXPECT_TRUE(test_util::has(msg, "'uneven'")) << msg;
  EXPECT_TRUE(test_util::has(msg, "the ranks disagree")) << msg;
  EXPECT_TRUE(test_util::has(msg, comm().rank() == 1 ? "this rank (1) has 9 float32" : "rank 1 has 9 float32")) << msg;
  Tensor u = full({3}, 2.0);
  comm().all_reduce(u)->wait();
  EXPECT_EQ(u.to_vector<float>()[2], 2.0f * comm().size());
}

TEST(MpiComm, ABadSharedMemorySlotSizeIsRefused) {
  for (const char* bad : {"12x", "-1", "", "99999999999999999999", "2147483648"}) {
    const test_util::ScopedEnv slot("EMBER_MPI_SHM_SLOT_BYTES", bad);
    expect_error([] { ember::dist::MpiCommunicator second; }, "EMBER_MPI_SHM_SLOT_BYTES", "number of bytes");
  }
}
