// The NCCL backend on real GPUs (GPU label): every collective against its expected values for
// every dtype and odd sizes, the ordering of the communication stream after the compute stream
// (and of compute after Work::wait()), point-to-point, the communicator contract the MPI suites
// run too (tests/dist/comm_contract.h: grouped exchanges, order, split), the errors, a pipeline,
// and data-parallel training of the MNIST CNN and the LSTM language model on cuda:<local rank>
// matching one process on the global batch.
//
// ctest runs it under mpirun -np 1 (any machine with a GPU) and -np 2 (two GPUs on the node);
// started without a launcher (scripts/gpu-check.sh, from the GPU bundle) it is one rank
// bootstrapped by a SelfCommunicator, or, with EMBER_TEST_RENDEZVOUS set, one of several ranks
// the check started itself (file_bootstrap.h; two on one GPU under NCCL_MULTI_RANK_GPU_ENABLE=1).
// `ember_gpu_nccl_tests --nccl-version` prints the version of the NCCL library it loads;
// `--ddp-overlap` times data-parallel steps with and without overlap instead (ddp_overlap_timing.h), and
// `--ddp-kill` kills rank 1 mid-step for the watchdog to end the others (dist/device_watchdog.h). The tests are
// written for any number of ranks. Without a CUDA device for every rank of the node, every rank prints why and exits 0,
// and ctest reports the test as skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "comm_contract.h"
#include "core/autograd/grad_mode.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/ops.h"
#include "ddp_overlap_timing.h"
#include "dist/comm_mpi.h"
#include "dist/comm_nccl.h"
#include "dist/comm_self.h"
#include "dist/ddp.h"
#include "dist/ddp_split.h"
#include "dist/pipeline.h"
#include "file_bootstrap.h"
#include "layers/nn.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::dist;
using test_util::error_of;
using test_util::has;

namespace {

// The bootstrap: MPI under a launcher (mpirun sets OMPI_COMM_WORLD_SIZE, a PMI one PMI_SIZE), a
// world of one otherwise, so the GPU check runs the one-rank case where there is no MPI launcher.
std::unique_ptr<Communicator> g_mpi;
bool under_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}
std::unique_ptr<NcclCommunicator> g_nccl;

NcclCommunicator& nccl() {
  return *g_nccl;
}
int rank() {
  return nccl().rank();
}
int size() {
  return nccl().size();
}
Device dev() {
  return nccl().device();
}

// Host copies, converted to double.
std::vector<double> host(const Tensor& t) {
  return t.to(Device::cpu()).to_vector<double>();
}

void expect_all(const Tensor& t, double want, const std::string& what) {
  std::vector<double> v = host(t);
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != want) {
      ADD_FAILURE() << what << ": element " << i << " is " << v[i] << ", expected " << want;
      return;
    }
}

const std::vector<DType> kDtypes = {DType::Float32,  DType::Float64, DType::Float16,
                                    DType::BFloat16, DType::Int32,   DType::Int64};

TEST(Nccl, AllReduceEveryDtypeAndOddSizes) {
  const double n = size(), r = rank();
  for (DType dt : kDtypes)
    for (int64_t numel : {1, 7, 100003}) {
      std::string what = std::string(dtype_name(dt)) + " x" + std::to_string(numel);
      Tensor t = full({numel}, r + 1, {.dtype = dt, .device = dev()});
      nccl().all_reduce(t, ReduceOp::Sum, "sum")->wait();
      expect_all(t, n * (n + 1) / 2, "sum " + what);
      t.fill_(r + 1);
      nccl().all_reduce(t, ReduceOp::Max, "max")->wait();
      expect_all(t, n, "max " + what);
      if (is_floating(dt)) {
        t.fill_(2 * (r + 1));
        nccl().all_reduce(t, ReduceOp::Avg, "avg")->wait();
        expect_all(t, n + 1, "avg " + what);
      }
    }
}

// The collective must read what the compute stream wrote just before it, and compute queued after
// wait() must read the collective's result: a long matmul feeds the all-reduce, a kernel reads it.
TEST(Nccl, CollectivesAreOrderedWithTheComputeStream) {
  const double n = size(), r = rank();
  for (int rep = 0; rep < 3; ++rep) {
    Tensor a = full({2048, 2048}, 1.0 / 2048, {.device = dev()});
    Tensor b = full({2048, 2048}, r + 1, {.device = dev()});
    Tensor c = matmul(a, b);  // every element r + 1, after about 17 GFLOP of queued work
    nccl().all_reduce(c, ReduceOp::Sum, "after matmul")->wait();
    Tensor twice = mul(c, 2.0);
    std::vector<double> v = host(twice);
    double worst = 0;
    for (double x : v) worst = std::max(worst, std::abs(x - n * (n + 1)));
    EXPECT_LT(worst, 1e-3) << "rep " << rep;
  }
}

// A handle dropped without wait() still orders later compute after the collective (its tensors'
// memory may be reused by the next allocation on the compute stream).
TEST(Nccl, ADroppedHandleStillOrdersTheComputeStream) {
  const double n = size(), r = rank();
  Tensor a = full({2048, 2048}, 1.0 / 2048, {.device = dev()});
  Tensor c = matmul(a, full({2048, 2048}, r + 1, {.device = dev()}));
  nccl().all_reduce(c, ReduceOp::Sum, "dropped");  // the handle goes at once
  std::vector<double> v = host(mul(c, 2.0));
  double worst = 0;
  for (double x : v) worst = std::max(worst, std::abs(x - n * (n + 1)));
  EXPECT_LT(worst, 1e-3);
}

TEST(Nccl, BroadcastAllGatherReduceScatter) {
  const int n = size(), r = rank();
  Tensor t = full({5}, r, {.device = dev()});
  nccl().broadcast(t, n - 1, "from the last rank")->wait();
  expect_all(t, n - 1, "broadcast");

  Tensor in = full({5}, r + 1, {.dtype = DType::Int64, .device = dev()});
  Tensor out = empty({5 * n}, {.dtype = DType::Int64, .device = dev()});
  nccl().all_gather(out, in, "gather")->wait();
  std::vector<double> g = host(out);
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(g[static_cast<size_t>(q * 5 + i)], q + 1) << "block " << q;

  // Block b of rank q holds 10 q + b; rank r receives the sum over q of block r.
  std::vector<double> blocks;
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < 3; ++i) blocks.push_back(10.0 * r + b);
  Tensor src = from_vector(blocks, {3 * static_cast<int64_t>(n)}, TensorOptions{.device = dev()});  // float32
  Tensor dst = empty({3}, {.device = dev()});
  nccl().reduce_scatter(dst, src, ReduceOp::Sum, "scatter")->wait();
  expect_all(dst, 10.0 * n * (n - 1) / 2 + static_cast<double>(n) * r, "reduce_scatter");

  nccl().barrier("done")->wait();
}

// A ring: even ranks send first, odd ranks receive first (NCCL runs the two on one stream in
// order, so two ranks that both send first would wait for each other).
TEST(Nccl, PointToPointRing) {
  const int n = size(), r = rank();
  if (n < 2) GTEST_SKIP() << "point-to-point needs two ranks";
  Tensor mine = full({1000}, r, {.device = dev()});
  Tensor got = empty({1000}, {.device = dev()});
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  if (r % 2 == 0) {
    nccl().send(mine, next)->wait();
    nccl().recv(got, prev)->wait();
  } else {
    nccl().recv(got, prev)->wait();
    nccl().send(mine, next)->wait();
  }
  expect_all(got, prev, "recv");
}

// ncclCommSplit: even and odd ranks form two groups (one group of one on a single GPU), each with
// its own collectives; the group's barrier returns on the host.
TEST(Nccl, SplitGivesEachGroupItsCommunicator) {
  const int n = size(), r = rank();
  std::unique_ptr<Communicator> group = nccl().split(r % 2, r);
  const int members = (n - r % 2 + 1) / 2;
  EXPECT_EQ(group->size(), members);
  EXPECT_EQ(group->rank(), r / 2);
  EXPECT_EQ(group->device(), dev());
  Tensor one = ones({5}, {.device = dev()});
  group->all_reduce(one)->wait();
  expect_all(one, members, "the group's all_reduce");
  group->barrier("split test")->wait();
  nccl().barrier("after the groups")->wait();
}

// A pipeline of one stage per GPU rank (activations and gradients through NCCL in the order of
// dist/pipeline.cpp; one stage, gradient accumulation, on a single GPU) ends 2 steps
// of both schedules with the weights of one process training the whole model on the batch.
TEST(Nccl, PipelineTrainsLikeOneProcess) {
  const int k = size();
  for (PipelineSchedule sched : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    auto make = [] {
      manual_seed(21);
      auto m = std::make_shared<nn::Sequential>();
      for (int i = 0; i < 4; ++i) {
        m->push_back(nn::make<nn::Linear>(16, 16));
        m->push_back(nn::make<nn::Tanh>());
      }
      return m;
    };
    auto model = make(), ref = make();
    model->to(dev());
    ref->to(dev());
    std::vector<int> bounds;
    for (int s = 0; s < k; ++s) bounds.push_back(static_cast<int>(s * model->size() / k));
    Pipeline pipe(*model, bounds, nccl(), {.micro_batches = 3, .schedule = sched});
    optim::SGD opt(pipe.parameters(), {.lr = 0.1});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.1});
    auto mse = [](const Tensor& out, const Tensor& y) { return nn::mse_loss(out, y); };
    for (int step = 0; step < 2; ++step) {
      Generator g(30 + static_cast<uint64_t>(step));
      Tensor x = randn({10, 16}, {}, &g).to(dev()), y = randn({10, 16}, {}, &g).to(dev());
      opt.zero_grad();
      const double loss = pipe.train_step(x, y, mse);
      opt.step();
      ref_opt.zero_grad();
      Tensor l = mse(ref->forward(x), y);
      l.backward();
      ref_opt.step();
      EXPECT_NEAR(loss, l.item(), 1e-5) << pipeline_schedule_name(sched) << " step " << step;
    }
    std::map<std::string, Tensor> want;
    for (auto& [name, t] : ref->state_dict()) want[name] = t;
    for (auto& [name, t] : pipe.stage_module().state_dict()) {
      const std::vector<double> a = host(t), b = host(want.at(name));
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      EXPECT_LT(worst, 1e-5) << name << ", " << pipe.describe() << ", " << pipeline_schedule_name(sched);
    }
  }
}

TEST(Nccl, ErrorsNameTheTensorAndWhatWasExpected) {
  std::string msg = error_of([] { nccl().all_reduce(zeros({3})); });
  EXPECT_TRUE(has(msg, "all_reduce: expected a tensor on " + dev().str() + ", got one on cpu")) << msg;
  msg = error_of([] { nccl().all_reduce(zeros({3}, {.dtype = DType::Int32, .device = dev()}), ReduceOp::Avg); });
  EXPECT_TRUE(has(msg, "avg reduction needs a floating-point tensor")) << msg;
  msg = error_of([] { nccl().send(zeros({3}, {.device = dev()}), rank()); });
  EXPECT_TRUE(has(msg, "send: expected another rank")) << msg;
  nn::Linear on_cpu(3, 2);
  msg = error_of([&] { DistributedDataParallel d(on_cpu, nccl()); });
  EXPECT_TRUE(has(msg, "'weight' is on cpu but the nccl communicator moves tensors on " + dev().str())) << msg;
}

double max_param_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = host(pa[i]), vb = host(pb[i]);
    for (size_t j = 0; j < va.size(); ++j) worst = std::max(worst, std::abs(va[j] - vb[j]));
  }
  return worst;
}

// K steps of SGD with momentum on cuda:<local rank>, data-parallel over NCCL with small buckets,
// against the same model trained on the whole global batch in one process.
TEST(Nccl, DataParallelMnistCnnMatchesOneProcessOnTheGlobalBatch) {
  const int64_t per_rank = 8, global = per_rank * size();
  manual_seed(7 + static_cast<uint64_t>(rank()));  // different weights per rank until DDP copies rank 0's
  models::MnistCnn net;
  net.to(dev());
  DdpOptions o;
  o.first_bucket_cap_mb = 0.02;
  o.bucket_cap_mb = 0.1;
  DistributedDataParallel ddp(net, nccl(), o);
  ASSERT_GE(ddp.bucket_layout().size(), 3u);
  manual_seed(7);
  models::MnistCnn ref;
  ref.to(dev());
  ASSERT_EQ(max_param_diff(net, ref), 0.0) << "DDP did not start from rank 0's parameters";
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.05, .momentum = 0.9});
  BatchSplitter split(nccl(), global, {.speed_weighted = true, .measure_steps = 1, .remeasure_every = 2});
  for (int step = 0; step < 4; ++step) {
    Generator g(500 + static_cast<uint64_t>(step));
    Tensor x = randn({global, 1, 28, 28}, {}, &g).to(dev());
    Tensor y = randint(0, 10, {global}, {.dtype = DType::Int64}, &g).to(dev());
    split.begin_compute();
    Tensor xs = x.narrow(0, split.local_offset(), split.local_share());
    Tensor ys = y.narrow(0, split.local_offset(), split.local_share());
    opt.zero_grad();
    cross_entropy(ddp(xs), ys).mul_(split.loss_weight()).backward();
    split.end_compute(ddp.last_timeline().last_grad);
    opt.step();
    split.end_step();  // its timing exchange runs on the GPU too
    ref_opt.zero_grad();
    cross_entropy(ref(x), y).backward();
    ref_opt.step();
  }
  EXPECT_EQ(ddp.steps_synchronized(), 4);
  EXPECT_LT(max_param_diff(net, ref), 2e-5);
  // And the parameters moved (a test of nothing would pass trivially).
  manual_seed(7);
  models::MnistCnn init;
  init.to(dev());
  EXPECT_GT(max_param_diff(net, init), 1e-3);
}

// The communicator contract the MPI suites run (tests/dist/comm_contract.h), here on NCCL:
// grouped exchanges (ncclGroupStart/End), order per peer, ncclCommSplit's groups.
TEST(NcclContract, GroupedRing) {
  comm_contract::grouped_ring(nccl());
}
TEST(NcclContract, OrderPerPeer) {
  comm_contract::order_per_peer(nccl());
}
TEST(NcclContract, SplitGroups) {
  comm_contract::split_groups(nccl());
}
TEST(NcclContract, RefusedExchange) {
  comm_contract::refused_exchange(nccl());
}

// The LSTM language model, data-parallel over NCCL (its embedding's gradient and the LSTM's
// fused weights in buckets), against one process on the global batch.
TEST(Nccl, DataParallelLstmLanguageModelMatchesOneProcess) {
  const int64_t per_rank = 4, global = per_rank * size();
  const models::LstmLmOptions lm{.vocab_size = 23, .embed_dim = 16, .hidden = 32, .layers = 2};
  manual_seed(11 + static_cast<uint64_t>(rank()));
  models::LstmLanguageModel net(lm);
  net.to(dev());
  DdpOptions o;
  o.bucket_cap_mb = 0.01;
  DistributedDataParallel ddp(net, nccl(), o);
  manual_seed(11);
  models::LstmLanguageModel ref(lm);
  ref.to(dev());
  ASSERT_EQ(max_param_diff(net, ref), 0.0) << "DDP did not start from rank 0's parameters";
  optim::SGD opt(net.parameters(), {.lr = 0.5});
  optim::SGD ref_opt(ref.parameters(), {.lr = 0.5});
  auto lm_loss = [](const Tensor& logits, const Tensor& y) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  };
  for (int step = 0; step < 3; ++step) {
    Generator g(700 + static_cast<uint64_t>(step));
    Tensor x = randint(0, 23, {global, 9}, {.dtype = DType::Int64}, &g).to(dev());
    Tensor y = randint(0, 23, {global, 9}, {.dtype = DType::Int64}, &g).to(dev());
    opt.zero_grad();
    // Each rank's mean over its equal share; DDP averages the ranks' gradients.
    lm_loss(ddp(x.narrow(0, rank() * per_rank, per_rank)), y.narrow(0, rank() * per_rank, per_rank)).backward();
    opt.step();
    ref_opt.zero_grad();
    lm_loss(ref.forward(x), y).backward();
    ref_opt.step();
  }
  EXPECT_EQ(ddp.steps_synchronized(), 3);
  EXPECT_LT(max_param_diff(net, ref), 2e-5);
  manual_seed(11);
  models::LstmLanguageModel init(lm);
  init.to(dev());
  EXPECT_GT(max_param_diff(net, init), 1e-3);
}

// --ddp-kill (two or more ranks, EMBER_NCCL_TIMEOUT_SECONDS set short by the GPU check): DDP steps
// of the MNIST CNN; rank 1 kills itself in step 3 after its forward, and the others, their
// gradient buckets queued on NCCL and the host blocked on the next step, must be ended by the
// communicator's watchdog naming the bucket (exit status kPeerLostExit), not hang.
int ddp_kill(NcclCommunicator& comm) {
  manual_seed(7);
  models::MnistCnn net;
  net.to(comm.device());
  DdpOptions o;
  o.first_bucket_cap_mb = 0.02;
  DistributedDataParallel ddp(net, comm, o);
  optim::SGD opt(net.parameters(), {.lr = 0.05});
  for (int step = 0; step < 8; ++step) {
    Generator g(900 + static_cast<uint64_t>(step));
    Tensor x = randn({8, 1, 28, 28}, {}, &g).to(comm.device());
    Tensor y = randint(0, 10, {8}, {.dtype = DType::Int64}, &g).to(comm.device());
    opt.zero_grad();
    Tensor loss = cross_entropy(ddp(x), y);
    if (comm.rank() == 1 && step == 3) std::raise(SIGKILL);
    loss.backward();
    opt.step();
    std::cout << "rank " << comm.rank() << ": step " << step << " loss " << loss.item() << std::endl;  // host waits
  }
  std::cout << "rank " << comm.rank() << ": finished 8 steps (the watchdog did not end it)" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The GPU check asks which NCCL the process loads (not the headers' version) before it starts
  // ranks that share a GPU, which needs 2.30.
  if (argc == 2 && std::string(argv[1]) == "--nccl-version") {
    const int v = NcclCommunicator::runtime_version();
    std::cout << "nccl " << v / 10000 << "." << v / 100 % 100 << "." << v % 100 << " (" << v << ")" << std::endl;
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (under_mpi_launcher())
    g_mpi = std::make_unique<MpiCommunicator>();
  else if (gpu_test::FileBootstrap::requested())
    g_mpi = std::make_unique<gpu_test::FileBootstrap>();
  else
    g_mpi = std::make_unique<SelfCommunicator>();
  const int devices = cuda_device_count();
  if (!NcclCommunicator::node_has_devices_for(g_mpi->local_size())) {
    // Every rank of the node sees the same count, so every rank leaves here.
    if (g_mpi->rank() == 0) {
      if (devices == 0)
        std::cout << "skipped: no CUDA device" << std::endl;
      else
        std::cout << "skipped: fewer CUDA devices (" << devices << ") than ranks on this node (" << g_mpi->local_size()
                  << "); NCCL_MULTI_RANK_GPU_ENABLE=1 lets them share one (NCCL >= 2.30)" << std::endl;
    }
    g_mpi.reset();
    return 0;
  }
  g_nccl = std::make_unique<NcclCommunicator>(*g_mpi);
  std::cout << "rank " << g_nccl->rank() << " of " << g_nccl->size() << " on " << g_nccl->device().str() << ", "
            << g_mpi->backend() << " bootstrap, NCCL " << NcclCommunicator::runtime_version() << std::endl;
  if (argc == 2 && std::string(argv[1]) == "--ddp-overlap") {  // gtest has taken its own flags
    gpu_test::time_ddp_overlap(*g_nccl);
    g_nccl.reset();
    g_mpi.reset();
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--ddp-kill") return ddp_kill(*g_nccl);
  if (g_mpi->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // A failure on one rank fails the job even when rank 0 passed (over NCCL itself when the
  // bootstrap was the file one, which has no collectives).
  Tensor mine = full({1}, rc != 0 ? 1.0 : 0.0);
  if (g_mpi->backend() == "file") {
    mine = mine.to(g_nccl->device());
    g_nccl->all_reduce(mine, ReduceOp::Max, "test result")->wait();
    mine = mine.to(Device::cpu());
  } else {
    g_mpi->all_reduce(mine, ReduceOp::Max, "test result")->wait();
  }
  g_nccl.reset();
  int worst = mine.item() > 0 ? 1 : 0;
  g_mpi.reset();
  return worst;
}
