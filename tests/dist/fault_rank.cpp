// A small MPI program for fault_test.sh: ranks all-reduce in a loop while one rank misbehaves.
//   kill:  rank 1 kills itself (SIGKILL) mid-run; the others must exit with kPeerLostExit.
//   leave: rank 1 ends its program one collective early; the others must notice and exit.
//   stall: rank 1 is 3 s late for a collective; the others report the stall, then all finish.
//   ddp:   data-parallel training of a small model; rank 1 kills itself during step 3, and the
//          others, waiting on a gradient bucket, must say so and exit.
//   pipeline_throw:    a 3-stage pipeline; stage 1's layer throws in step 3; it exits with the
//                      error naming its stage, and the stages waiting on it exit too.
//   pipeline_kill:     the same, stage 1 is killed (SIGKILL) in step 3.
//   pipeline_mismatch: 2 stages started with different micro-batch counts: stage 1 says so.
//   device_wait: as a job whose collectives run on NCCL, bootstrapped through MPI: every rank has
//                an operation incomplete on a "device" (a stand-in registered with dist/comm.h)
//                and waits outside any MPI call, as in a stream synchronisation; rank 1 kills
//                itself, and the others' MPI heartbeat must end them naming that operation.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/ops.h"
#include "dist/comm_mpi.h"
#include "dist/ddp.h"
#include "dist/pipeline.h"
#include "layers/nn.h"

using namespace ember;

namespace {

int pipeline(dist::Communicator& comm, const std::string& mode, int steps) {
  int step = 0;
  auto fault = std::make_shared<nn::Lambda>(
      [&](const Tensor& x) {
        if (comm.rank() == 1 && step == 3 && mode == "pipeline_throw") EMBER_FAIL("a planted failure in step ", step);
        if (comm.rank() == 1 && step == 3 && mode == "pipeline_kill") std::raise(SIGKILL);
        return x;
      },
      "Fault");
  nn::Sequential net(nn::make<nn::Linear>(16, 32), nn::make<nn::ReLU>(), fault, nn::make<nn::Linear>(32, 4));
  const bool three = comm.size() == 3;
  dist::PipelineOptions o{.micro_batches = mode == "pipeline_mismatch" && comm.rank() == 1 ? 3 : 4};
  dist::Pipeline pipe(net, three ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 2}, comm, o);
  optim::SGD opt(pipe.parameters(), {.lr = 0.1});
  try {
    for (; step < steps; ++step) {
      opt.zero_grad();
      pipe.train_step(full({8, 16}, 0.5), zeros({8, 4}),
                      [](const Tensor& out, const Tensor& y) { return nn::mse_loss(out, y); });
      opt.step();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
    return 1;
  }
  std::printf("rank %d: finished %d steps\n", comm.rank(), steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> modes = {
      "kill", "leave", "stall", "ddp", "pipeline_throw", "pipeline_kill", "pipeline_mismatch", "device_wait"};
  if (argc != 2 || std::find(modes.begin(), modes.end(), argv[1]) == modes.end()) {
    std::fprintf(stderr,
                 "usage: ember_dist_fault kill|leave|stall|ddp|pipeline_throw|pipeline_kill|pipeline_mismatch|"
                 "device_wait\n");
    return 2;
  }
  std::string mode = argv[1];
  dist::MpiCommunicator comm({.heartbeat_seconds = 0.25, .stall_seconds = 1.0, .dead_seconds = 4.0});
  int steps = 8;
  if (mode.rfind("pipeline", 0) == 0) return pipeline(comm, mode, steps);
  if (mode == "device_wait") {
    dist::register_device_work(
        &comm, [] { return std::string("NCCL #4 all_reduce sum 'bucket 1 of step 3' (a stand-in, not complete)"); });
    comm.barrier("before the device wait")->wait();
    if (comm.rank() == 1) std::raise(SIGKILL);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // a stream synchronisation that never ends
  }
  if (mode == "ddp") {
    nn::Sequential net(nn::make<nn::Linear>(16, 32), nn::make<nn::ReLU>(), nn::make<nn::Linear>(32, 4));
    dist::DdpOptions o;
    o.first_bucket_cap_mb = 0.0001;  // several buckets
    dist::DistributedDataParallel ddp(net, comm, o);
    optim::SGD opt(net.parameters(), {.lr = 0.1});
    for (int s = 0; s < steps; ++s) {
      Tensor loss = ddp(full({4, 16}, 0.5)).pow(2).mean();
      if (comm.rank() == 1 && s == 3) std::raise(SIGKILL);  // mid-step: after forward, before backward
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    std::printf("rank %d: finished %d steps\n", comm.rank(), steps);
    return 0;
  }
  for (int s = 0; s < steps; ++s) {
    if (comm.rank() == 1) {
      if (mode == "kill" && s == 3) {
        std::printf("rank 1: killing myself at step %d\n", s);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      if (mode == "leave" && s == 3) {
        std::printf("rank 1: leaving early at step %d\n", s);
        return 0;
      }
      if (mode == "stall" && s == 3) std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    Tensor t = full({1000}, comm.rank());
    comm.all_reduce(t, dist::ReduceOp::Sum, "step " + std::to_string(s))->wait();
  }
  std::printf("rank %d: finished %d steps\n", comm.rank(), steps);
  return 0;
}
