// A small MPI program for fault_test.sh: ranks all-reduce in a loop while one rank misbehaves.
//   kill:  rank 1 kills itself (SIGKILL) mid-run; the others must exit with kPeerLostExit.
//   leave: rank 1 ends its program one collective early; the others must notice and exit.
//   stall: rank 1 is 3 s late for a collective; the others report the stall, then all finish.
//   ddp:   data-parallel training of a small model; rank 1 kills itself during step 3, and the
//          others, waiting on a gradient bucket, must say so and exit.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/ops.h"
#include "layers/nn.h"
#include "scheduler/parallel/comm_mpi.h"
#include "scheduler/parallel/ddp.h"

using namespace ember;

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "kill") && std::strcmp(argv[1], "leave") && std::strcmp(argv[1], "stall") &&
                    std::strcmp(argv[1], "ddp"))) {
    std::fprintf(stderr, "usage: ember_parallel_fault kill|leave|stall|ddp\n");
    return 2;
  }
  std::string mode = argv[1];
  dist::MpiCommunicator comm({.heartbeat_seconds = 0.25, .stall_seconds = 1.0, .dead_seconds = 4.0});
  int steps = 8;
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
