// bench/ddp: data-parallel training throughput on CPU ranks over MPI. Run with 2 ranks:
//   ember launch -n 2 -- build/bench/ddp [STEPS [ROUNDS]]   (or mpirun -np 2 build/bench/ddp)
// For the MNIST CNN and the LSTM language model it measures, in one run:
//   1 rank   rank 0 trains alone on its per-rank batch (the others wait): the reference;
//   N ranks  DistributedDataParallel, buckets all-reduced during backward (overlap on);
//   N ranks  the same with overlap off (every all-reduce after backward);
//   N ranks  overlap on, the global batch split in proportion to each rank's measured speed
//            (BatchSplitter, re-measured every 6 steps), so the faster core is not left waiting;
//   N ranks  each training alone at the same time, with no all-reduce at all: the ceiling that
//            this machine's shared cores, caches and memory bandwidth allow N ranks, so that the
//            cost of communication reads apart from the cost of running N processes at once.
// and prints each rank's compute time (forward and backward up to its last gradient), how long the
// ranks wait for the slowest one's backward in a step (compute times jitter from step to step, and
// a DDP step ends with the slowest rank's), samples/s, scaling efficiency (N-rank samples/s /
// (N x 1-rank samples/s)), and from the reducer's timeline the all-reduce time per step and the
// fraction of it hidden behind backward (1 - time from the last gradient to the end of the last
// all-reduce / all-reduce time), and the CPU time the communication thread used per step (taken
// from the rank's cores whether or not it overlaps; EMBER_MPI_SHM_SLOT_BYTES=0 compares the
// shared-memory all-reduce with MPI's).
// Medians over the timed steps. One math thread per rank unless OMP_NUM_THREADS says otherwise.
#include "dist/ddp.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/parallel.h"
#include "dist/comm_mpi.h"
#include "dist/ddp_split.h"
#include "layers/nn.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

using namespace ember;
using namespace ember::dist;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

// Length of the union of the buckets' [launched, finished] intervals.
double comm_busy(const DdpTimeline& tl) {
  std::vector<std::pair<Clock::time_point, Clock::time_point>> iv;
  for (const auto& b : tl.buckets) iv.emplace_back(b.launched, b.finished);
  std::sort(iv.begin(), iv.end());
  double total = 0;
  Clock::time_point end{};
  for (auto [a, b] : iv) {
    if (a < end) a = end;
    if (b > a) total += bench::seconds(b - a);
    end = std::max(end, b);
  }
  return total;
}

struct Workload {
  std::string name;
  int64_t batch;                                      // per rank
  std::function<std::shared_ptr<nn::Module>()> make;  // same weights on every call
  // The mean loss over `rows` examples (this rank's share of the step's global batch).
  std::function<Tensor(nn::Module&, DistributedDataParallel*, uint64_t step, int64_t rows)> loss;
};

struct Samples {
  std::vector<double> times, comms, hidden, compute, comm_cpu;
};
struct Phase {
  double step_s = 0, comm_s = 0, hidden = 0, compute_s = 0, comm_cpu_s = 0;
};
Phase medians(const Samples& s) {
  return {median(s.times), median(s.comms), median(s.hidden), median(s.compute), median(s.comm_cpu)};
}

enum class Mode { Alone, Overlap, NoOverlap, SpeedWeighted };

void run(Workload& w, MpiCommunicator& comm, Mode mode, int steps, DdpOptions base, Samples& out) {
  auto model = w.make();
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<BatchSplitter> split;
  if (mode != Mode::Alone) {
    DdpOptions o = base;
    o.overlap = mode != Mode::NoOverlap;
    ddp = std::make_unique<DistributedDataParallel>(*model, comm, o);
  }
  if (mode == Mode::SpeedWeighted)
    // Re-measured often: on a shared machine which core is the slower one changes within seconds.
    split = std::make_unique<BatchSplitter>(
        comm, w.batch * comm.size(), SplitOptions{.speed_weighted = true, .measure_steps = 2, .remeasure_every = 6});
  optim::SGD opt(model->parameters(), {.lr = 0.01});
  for (int s = 0; s < steps + 2; ++s) {
    auto t0 = Clock::now();
    const double cpu0 = comm.thread_cpu_seconds();
    opt.zero_grad();
    if (split) {
      split->begin_compute();
      w.loss(*model, ddp.get(), static_cast<uint64_t>(s), split->local_share()).mul_(split->loss_weight()).backward();
      split->end_compute(ddp->last_timeline().last_grad);
    } else {
      w.loss(*model, ddp.get(), static_cast<uint64_t>(s), w.batch).backward();
    }
    auto t1 = Clock::now();
    opt.step();
    if (split) split->end_step();
    double dt = bench::seconds(Clock::now() - t0);
    if (s < 2) continue;  // warm-up
    out.times.push_back(dt);
    out.comm_cpu.push_back(comm.thread_cpu_seconds() - cpu0);
    // Forward and backward up to this rank's last gradient: what it would take without the others.
    out.compute.push_back(bench::seconds((ddp ? ddp->last_timeline().last_grad : t1) - t0));
    if (ddp) {
      const DdpTimeline& tl = ddp->last_timeline();
      double busy = comm_busy(tl);
      double exposed = std::max(0.0, bench::seconds(tl.synchronized - tl.last_grad));
      out.comms.push_back(busy);
      out.hidden.push_back(busy > 0 ? std::clamp(1.0 - exposed / busy, 0.0, 1.0) : 0.0);
    }
  }
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Every rank's value of `v` (a collective: every rank calls it).
std::vector<double> gather(Communicator& comm, double v) {
  Tensor mine = full({1}, v, {.dtype = DType::Float64});
  Tensor all = empty({comm.size()}, {.dtype = DType::Float64});
  comm.all_gather(all, mine, "bench per-rank value")->wait();
  return {all.data_ptr<double>(), all.data_ptr<double>() + comm.size()};
}

// What stepping together costs when the ranks' compute times jitter: per step, the mean over the
// ranks of how long each waits for the slowest one to finish its backward; the median over the
// steps. Every rank holds one compute time per step, in the same order (a collective).
double lockstep_wait(Communicator& comm, const std::vector<double>& compute) {
  const auto n = static_cast<int64_t>(compute.size());
  if (n == 0) return 0;
  Tensor all = empty({n * comm.size()}, {.dtype = DType::Float64});
  comm.all_gather(all, from_vector(compute, {n}, TensorOptions{.dtype = DType::Float64}), "bench compute times")
      ->wait();
  const double* c = all.data_ptr<double>();
  std::vector<double> waits;
  for (int64_t s = 0; s < n; ++s) {
    double slowest = 0, sum = 0;
    for (int r = 0; r < comm.size(); ++r) slowest = std::max(slowest, c[r * n + s]);
    for (int r = 0; r < comm.size(); ++r) sum += slowest - c[r * n + s];
    waits.push_back(sum / comm.size());
  }
  return median(waits);
}

// Seconds as "a/b/..." ms, rank order.
std::string per_rank_ms(const std::vector<double>& v) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r) {
    if (r) s += '/';
    s += fmt("%.1f", v[r] * 1e3);
  }
  return s;
}

// The models timed: each makes the same weights on every call, and its loss draws this rank's
// examples of a step from a seed of the step and the rank.
std::vector<Workload> workloads(MpiCommunicator& comm) {
  std::vector<Workload> loads;
  loads.push_back({"MnistCnn", 32,
                   [] {
                     manual_seed(1);
                     auto m = std::make_shared<models::MnistCnn>();
                     nn::fuse(*m);  // as the example trains it
                     return m;
                   },
                   [&](nn::Module& m, DistributedDataParallel* d, uint64_t s, int64_t rows) {
                     Generator g(1000 * s + static_cast<uint64_t>(comm.rank()));
                     Tensor x = randn({rows, 1, 28, 28}, {}, &g);
                     Tensor y = randint(0, 10, {rows}, {.dtype = DType::Int64}, &g);
                     return cross_entropy(d ? d->forward(x) : m(x), y);
                   }});
  loads.push_back({"LstmLM (V=2000, T=35)", 16,
                   [] {
                     manual_seed(1);
                     return std::make_shared<models::LstmLanguageModel>(
                         models::LstmLmOptions{.vocab_size = 2000, .embed_dim = 64, .hidden = 128});
                   },
                   [&](nn::Module& m, DistributedDataParallel* d, uint64_t s, int64_t rows) {
                     Generator g(1000 * s + static_cast<uint64_t>(comm.rank()));
                     Tensor tok = randint(0, 2000, {rows, 36}, {.dtype = DType::Int64}, &g);
                     Tensor in = tok.narrow(1, 0, 35).contiguous(), tgt = tok.narrow(1, 1, 35).contiguous();
                     auto& lm = static_cast<models::LstmLanguageModel&>(m);
                     Tensor logits = lm.forward_with_state(in).output;
                     if (d) d->prepare_for_backward({logits});
                     return cross_entropy(logits.reshape({-1, 2000}), tgt.reshape({-1}));
                   }});
  return loads;
}

// The probe table's row of workload w: its buckets all-reduced with no compute running, the
// transfer cost alone, against which the per-step all-reduce time (which includes waiting for the
// slower rank) reads.
std::vector<std::string> probe_all_reduce(const Workload& w, MpiCommunicator& comm, const DdpOptions& base) {
  auto model = w.make();
  DistributedDataParallel probe(*model, comm, base);
  std::vector<Tensor> flats;
  for (const auto& b : probe.bucket_layout()) flats.push_back(zeros({b.numel}));
  std::vector<double> ts;
  for (int r = 0; r < 15; ++r) {
    comm.barrier("probe")->wait();
    auto t0 = Clock::now();
    std::vector<WorkPtr> ws;
    for (auto& f : flats) ws.push_back(comm.all_reduce(f, ReduceOp::Sum, "probe"));  // as the reducer
    for (auto& x : ws) x->wait();
    ts.push_back(bench::seconds(Clock::now() - t0));
  }
  int64_t total = 0;
  for (const auto& f : flats) total += f.numel();
  return {w.name, std::to_string(flats.size()), fmt("%.2f", static_cast<double>(total) * 4 / 1e6),
          fmt("%.2f", median(ts) * 1e3)};
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(
            argc, argv,
            "usage: %s [steps=6] [rounds=3]\n\nData-parallel training throughput on MPI ranks; run it as: ember launch "
            "-n 2 -- build/bench/ddp\n"))
      return 0;
    int steps = argc > 1 ? std::atoi(argv[1]) : 6;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
    if (!std::getenv("OMP_NUM_THREADS")) set_num_threads(1);
    MpiCommunicator comm;
    const int n = comm.size();
    // Small buckets: this model's 0.37 MB of gradients would otherwise fit in the 1 MB first bucket,
    // and nothing could start before backward ends.
    DdpOptions base;
    base.first_bucket_cap_mb = 0.01;
    base.bucket_cap_mb = 0.15;
    base.gradient_as_bucket_view = true;  // no copy of the buckets per step

    std::vector<Workload> loads = workloads(comm);

    bench::Table t{{"model", "per-rank batch", "config", "step ms by rank", "compute ms by rank", "wait for slowest ms",
                    "samples/s", "vs 1 rank", "efficiency", "all-reduce ms/step", "hidden", "comm thread CPU ms/step"}};
    bench::Table probe_t{{"model", "buckets", "gradient MB", "all-reduce ms, no compute"}};
    auto& alone_rows = probe_t.rows;
    for (auto& w : loads) {
      // Rounds interleave the configurations, so a change in the machine's load hits all.
      Samples s_alone, s_on, s_off, s_weighted, s_concurrent;
      for (int r = 0; r < rounds; ++r) {
        if (comm.rank() == 0) run(w, comm, Mode::Alone, steps, base, s_alone);
        comm.barrier("reference done")->wait();
        run(w, comm, Mode::Overlap, steps, base, s_on);
        run(w, comm, Mode::NoOverlap, steps, base, s_off);
        run(w, comm, Mode::SpeedWeighted, steps, base, s_weighted);
        comm.barrier("concurrent start")->wait();
        run(w, comm, Mode::Alone, steps, base, s_concurrent);
        comm.barrier("concurrent done")->wait();
      }
      Phase alone = medians(s_alone);
      alone_rows.push_back(probe_all_reduce(w, comm, base));
      double sps1 = static_cast<double>(w.batch) / alone.step_s;
      t.rows.push_back({w.name, std::to_string(w.batch), "1 rank (reference)", fmt("%.1f", alone.step_s * 1e3),
                        fmt("%.1f", alone.compute_s * 1e3), "-", fmt("%.0f", sps1), "1.00", "-", "-", "-", "-"});
      for (auto [label, samples] : {std::pair{"overlap on", &s_on}, std::pair{"overlap off", &s_off},
                                    std::pair{"overlap on, speed-weighted split", &s_weighted},
                                    std::pair{"no all-reduce (ceiling)", &s_concurrent}}) {
        const Phase p = medians(*samples);
        const bool ddp = samples != &s_concurrent;
        // DDP ranks step together; ranks running alone at once do not, and their throughputs add up.
        std::vector<double> step_s = gather(comm, p.step_s);
        double sps = 0;
        for (double st : step_s) sps += static_cast<double>(w.batch) / st;
        const double wait = lockstep_wait(comm, samples->compute);
        t.rows.push_back({w.name, std::to_string(w.batch), std::to_string(n) + " ranks, " + label, per_rank_ms(step_s),
                          per_rank_ms(gather(comm, p.compute_s)), ddp ? fmt("%.2f", wait * 1e3) : "-", fmt("%.0f", sps),
                          fmt("%.2f", sps / sps1), fmt("%.0f%%", 100.0 * sps / (n * sps1)),
                          ddp ? fmt("%.2f", p.comm_s * 1e3) : "-", ddp ? fmt("%.0f%%", 100.0 * p.hidden) : "-",
                          ddp ? per_rank_ms(gather(comm, p.comm_cpu_s)) : "-"});
      }
    }
    if (comm.rank() == 0) {
      bench::print_cpu_line();
      std::printf(
          "bench/ddp: %d ranks, %d rounds x %d timed steps per row (medians), %d math thread(s) per rank, "
          "buckets %.2f MB first / %.2f MB, gradients as bucket views, all_reduce through %s\n",
          n, rounds, steps, get_num_threads(), base.first_bucket_cap_mb, base.bucket_cap_mb,
          comm.shared_memory_all_reduce() ? "shared memory" : "MPI");
      t.print();
      std::printf("\n");
      probe_t.print();
    }
    return 0;
  });
}
