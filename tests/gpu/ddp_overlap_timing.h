// `ember_gpu_nccl_tests --ddp-overlap`, which the GPU check runs on its two ranks after the suite
// passed: data-parallel MnistCnn steps with the bucketed all-reduce overlapped with backward, and
// without (DdpOptions::overlap = false: no all-reduce starts before backward ends), in
// alternating rounds so that both see the same machine. It prints the medians and spreads; it
// asserts nothing (a timing, not a test).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "core/stream.h"
#include "dist/ddp.h"
#include "layers/nn.h"
#include "models/mnist_cnn.h"

namespace gpu_test {

struct DdpTimed {
  std::unique_ptr<ember::models::MnistCnn> net;
  std::unique_ptr<ember::dist::DistributedDataParallel> ddp;
  std::unique_ptr<ember::optim::SGD> opt;
  std::vector<double> ms;  // per step, one entry per round
};

inline void time_ddp_overlap(ember::dist::Communicator& c, int rounds = 5, int steps = 20) {
  using namespace ember;
  const Device dev = c.device();
  const int64_t rows = 64;
  Generator g(1234 + static_cast<uint64_t>(c.rank()));
  Tensor x = randn({rows, 1, 28, 28}, {}, &g).to(dev);
  Tensor y = randint(0, 10, {rows}, {.dtype = DType::Int64}, &g).to(dev);
  DdpTimed runs[2];  // [0] overlapped, [1] not
  for (int v = 0; v < 2; ++v) {
    manual_seed(7);
    runs[v].net = std::make_unique<models::MnistCnn>();
    runs[v].net->to(dev);
    dist::DdpOptions o;
    o.bucket_cap_mb = 0.25;  // several buckets, so that the first can go while backward runs
    o.overlap = v == 0;
    runs[v].ddp = std::make_unique<dist::DistributedDataParallel>(*runs[v].net, c, o);
    runs[v].opt = std::make_unique<optim::SGD>(runs[v].net->parameters(), optim::SGDOptions{.lr = 0.01});
  }
  Stream& compute = get_stream(dev, StreamKind::Compute);
  auto run = [&](DdpTimed& r, int n) {
    for (int i = 0; i < n; ++i) {
      r.opt->zero_grad();
      cross_entropy(r.ddp->forward(x), y).backward();
      r.opt->step();
    }
    compute.synchronize();
  };
  for (DdpTimed& r : runs) run(r, 5);  // warm-up: kernels chosen, allocator filled
  for (int round = 0; round < rounds; ++round)
    for (DdpTimed& r : runs) {
      c.barrier("timing round")->wait();
      const auto t0 = std::chrono::steady_clock::now();
      run(r, steps);
      r.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps);
    }
  if (c.rank() != 0) return;
  std::printf(
      "ddp overlap: MnistCnn, %d ranks on %s, %lld rows each, buckets of 0.25 MB; ms per step, median of %d "
      "rounds of %d steps [min-max]\n",
      c.size(), dev.str().c_str(), static_cast<long long>(rows), rounds, steps);
  const char* names[2] = {"overlapped", "not overlapped"};
  for (int v = 0; v < 2; ++v) {
    std::vector<double> m = runs[v].ms;
    std::sort(m.begin(), m.end());
    std::printf("ddp overlap: %-15s %.3f ms [%.3f-%.3f]\n", names[v], m[m.size() / 2], m.front(), m.back());
  }
}

}  // namespace gpu_test
