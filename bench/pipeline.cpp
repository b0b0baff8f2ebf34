// bench/pipeline: pipeline-parallel training throughput on CPU ranks over MPI. Run with 2 ranks:
//   ember launch -n 2 -- build/bench/pipeline [STEPS [ROUNDS [HIDDEN [BATCH]]]]
//   (or mpirun -np 2 build/bench/pipeline)
// The model is 8 equal blocks, Linear(H, H) + Tanh, as one nn::Sequential, cut into K = world size
// stages of 8 / K blocks each (so the stages balance), trained with an MSE loss on a global batch
// of N rows. In one run it measures:
//   1 process   rank 0 trains the whole model alone (the others idle): on the whole batch at once
//               (the reference, T1), and on the same M micro-batches as the pipeline with the
//               gradient accumulated (what smaller GEMMs alone cost, without any pipeline);
//   K ranks     dist::Pipeline under GPipe and under 1F1B for M in {1, 2, 4, 8, 16};
//   K ranks     each computing its own stage's forward and backward over the M micro-batches at
//               the same time, with no messages: what the shared cores (and, on a busy machine,
//               the other programs) let K stages compute at once.
// If the stages balance and messages were free, K ranks would run K * M / (M + K - 1) times as
// fast as one process (the bubble: each stage idles K - 1 of the M + K - 1 micro-batch slots), so
// the ratio printed is the measured speed-up over that ideal; the "same M" ratio divides out the
// smaller micro-batch GEMMs and leaves the bubble, communication and the shared machine; the last
// ratio, (M + K - 1) / M x the slowest stage's time alone over the pipeline's step, leaves only
// what the pipeline adds to its bubble (messages, waiting, the communication thread).
// Per stage (rank order "a/b"): compute and wait seconds per step, the allocator's peak above the
// step's start and the most micro-batches held at once (PipelineStepStats), and the CPU time the
// rank's communication thread used per step (taken from the cores the stages compute on).
// Variants alternate within each round, so a change in the machine's load hits all of them;
// medians over the rounds, warm-up steps excluded. One math thread per rank unless OMP_NUM_THREADS
// says otherwise.
#include "dist/pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/allocator.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "dist/comm_mpi.h"
#include "layers/nn.h"

using namespace ember;
using namespace ember::dist;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kBlocks = 8;
const int kMicroBatches[] = {1, 2, 4, 8, 16};
const PipelineSchedule kSchedules[] = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB};

struct Config {
  int steps = 4, rounds = 5, warmup = 1;
  int64_t hidden = 1024, batch = 256;
};

using bench::median;

std::shared_ptr<nn::Sequential> make_model(int64_t h) {
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>();
  for (int b = 0; b < kBlocks; ++b) {
    m->push_back(nn::make<nn::Linear>(h, h));
    m->push_back(nn::make<nn::Tanh>());
  }
  return m;
}

// Stage s starts at block s * 8 / K: equal stages for K in {1, 2, 4, 8}.
std::vector<int> even_boundaries(int k) {
  std::vector<int> b;
  for (int s = 0; s < k; ++s) b.push_back(2 * (s * kBlocks / k));
  return b;
}

Tensor mse(const Tensor& out, const Tensor& y) {
  return nn::mse_loss(out, y);
}

// The multiply-adds of the Linear layers per sample, forward (2 H^2 per block) and backward (input
// and weight gradients, 4 H^2): what GFLOP/s counts.
double flops_per_sample(int64_t h) {
  return 6.0 * kBlocks * static_cast<double>(h) * static_cast<double>(h);
}

// Waits for `w` with this rank's threads asleep: a caller blocked in wait() makes the
// communication thread poll back to back, which would take a core from the rank that computes.
void idle_until(const WorkPtr& w) {
  while (!w->completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  w->wait();
}

struct Samples {
  std::vector<double> step;  // per round: mean seconds per timed step
  std::vector<double> compute, wait, peak, in_flight, comm_cpu;
};

void run_pipeline(nn::Sequential& model, MpiCommunicator& comm, PipelineSchedule sched, int m, const Config& c,
                  const Tensor& x, const Tensor& y, Samples& out) {
  comm.barrier("variant start")->wait();
  Pipeline pipe(model, even_boundaries(comm.size()), comm, {.micro_batches = m, .schedule = sched});
  optim::SGD opt(pipe.parameters(), {.lr = 1e-4});
  Clock::time_point t0;
  for (int s = 0; s < c.warmup + c.steps; ++s) {
    if (s == c.warmup) t0 = Clock::now();
    const double cpu0 = comm.thread_cpu_seconds();
    opt.zero_grad();
    pipe.train_step(pipe.is_first() ? x : Tensor(), pipe.is_last() ? y : Tensor(), mse);
    opt.step();
    if (s < c.warmup) continue;
    const PipelineStepStats& st = pipe.last_step();
    out.compute.push_back(st.compute_seconds);
    out.wait.push_back(st.wait_seconds);
    out.peak.push_back(static_cast<double>(st.peak_bytes));
    out.in_flight.push_back(st.max_in_flight);
    out.comm_cpu.push_back(comm.thread_cpu_seconds() - cpu0);
  }
  out.step.push_back(bench::seconds(Clock::now() - t0) / c.steps);
}

// The whole model in this process over the same batch, its gradient accumulated over m
// micro-batches weighted by their share of the batch (m = 1: plain training).
void run_reference(nn::Sequential& model, int m, const Config& c, const Tensor& x, const Tensor& y, Samples& out) {
  optim::SGD opt(model.parameters(), {.lr = 1e-4});
  const std::vector<int64_t> sizes = micro_batch_sizes(c.batch, m);
  Allocator* alloc = get_allocator(Device::cpu());
  Clock::time_point t0;
  for (int s = 0; s < c.warmup + c.steps; ++s) {
    if (s == c.warmup) t0 = Clock::now();
    opt.zero_grad();
    // From after zero_grad, as the pipeline's train_step measures: the gradients count.
    const int64_t at_start = alloc->stats().in_use;
    alloc->reset_peak();
    int64_t at = 0;
    for (int64_t n : sizes) {
      Tensor l = mse(model.forward(x.narrow(0, at, n)), y.narrow(0, at, n));
      (m == 1 ? l : mul(l, static_cast<double>(n) / static_cast<double>(c.batch))).backward();
      at += n;
    }
    opt.step();
    if (s >= c.warmup) out.peak.push_back(static_cast<double>(alloc->stats().peak - at_start));
  }
  out.step.push_back(bench::seconds(Clock::now() - t0) / c.steps);
}

// Every rank runs its own stage's forward and backward over the m micro-batches at the same time,
// with no messages and no waiting: what the shared cores let K stages compute at once, against
// which the pipeline's bubble and communication read apart from the machine's contention.
void run_alone_at_once(nn::Sequential& model, Communicator& comm, int m, const Config& c, const Tensor& x,
                       const Tensor& y, Samples& out) {
  comm.barrier("alone at once start")->wait();
  Pipeline pipe(model, even_boundaries(comm.size()), comm, {.micro_batches = m});
  nn::Sequential& stage = pipe.stage_module();
  optim::SGD opt(pipe.parameters(), {.lr = 1e-4});
  const std::vector<int64_t> sizes = micro_batch_sizes(c.batch, m);
  Clock::time_point t0;
  for (int s = 0; s < c.warmup + c.steps; ++s) {
    if (s == c.warmup) t0 = Clock::now();
    opt.zero_grad();
    int64_t at = 0;
    for (int64_t n : sizes) {
      // As the pipeline's stages get them: the first a view of the batch, the others a fresh leaf
      // whose gradient goes back.
      Tensor in = x.narrow(0, at, n);
      if (!pipe.is_first()) in = in.clone().requires_grad_();
      Tensor o = stage.forward(in);
      if (pipe.is_last())
        mul(mse(o, y.narrow(0, at, n)), static_cast<double>(n) / static_cast<double>(c.batch)).backward();
      else
        o.backward(y.narrow(0, at, n));
      at += n;
    }
    opt.step();
  }
  out.step.push_back(bench::seconds(Clock::now() - t0) / c.steps);
  idle_until(comm.barrier("alone at once done"));
}

// One thread's GEMM rate at a micro-batch's forward shape [rows x H] . [H x H]: the ceiling each
// rank's compute runs against.
double gemm_gflops(int64_t rows, int64_t h) {
  Generator g(3);
  Tensor a = randn({rows, h}, {}, &g), w = randn({h, h}, {}, &g);
  const double t = bench::median_seconds([&] { (void)mm(a, w); }, 9, 2);
  return 2.0 * static_cast<double>(rows) * static_cast<double>(h) * static_cast<double>(h) / t / 1e9;
}

// Every rank's value of `v` (a collective: every rank calls it).
std::vector<double> gather(Communicator& comm, double v) {
  Tensor mine = full({1}, v, {.dtype = DType::Float64});
  Tensor all = empty({comm.size()}, {.dtype = DType::Float64});
  comm.all_gather(all, mine, "bench per-rank value")->wait();
  return {all.data_ptr<double>(), all.data_ptr<double>() + comm.size()};
}

std::string per_rank(const std::vector<double>& v, double scale, const char* f) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r) {
    if (r) s += '/';
    s += bench::fmt(v[r] * scale, f);
  }
  return s;
}

std::string load_average() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "unknown";
  return bench::fmt(l[0]) + " " + bench::fmt(l[1]) + " " + bench::fmt(l[2]);
}

// The pipeline table: each schedule at each micro-batch count against the one-process reference
// (sps1: its samples/s per micro-batch count) and the stages run alone at once. Every rank takes
// part in the gathers.
bench::Table pipeline_table(MpiCommunicator& comm, const Config& c, const std::vector<Samples>& pipe,
                            const std::vector<Samples>& alone, const std::vector<std::vector<double>>& gemm,
                            const std::vector<double>& sps1) {
  const int k = comm.size();
  const double fps = flops_per_sample(c.hidden);
  const size_t nm = std::size(kMicroBatches);
  bench::Table t{{"schedule", "M", "step ms", "samples/s", "GFLOP/s (ceiling)", "speed-up vs 1 process",
                  "ideal K*M/(M+K-1)", "ratio", "speed-up vs 1 process at same M", "ratio at same M",
                  "stages alone at once: step ms by stage", "ratio to stages alone at once", "compute ms by stage",
                  "wait ms by stage", "comm thread CPU ms by stage", "peak MB by stage", "in flight by stage"}};
  for (size_t i = 0; i < nm; ++i)
    for (size_t s = 0; s < 2; ++s) {
      const int m = kMicroBatches[i];
      const Samples& p = pipe[i * 2 + s];
      // The stages step together (the loss comes back from the last one); take the slowest.
      const std::vector<double> step = gather(comm, median(p.step));
      const double st = *std::max_element(step.begin(), step.end());
      const double sps = static_cast<double>(c.batch) / st;
      const double ideal = static_cast<double>(k) * m / (m + k - 1);
      const double ceiling = k * median(gemm[i]);
      const auto compute = gather(comm, median(p.compute)), wait = gather(comm, median(p.wait)),
                 peak = gather(comm, median(p.peak)), in_flight = gather(comm, median(p.in_flight)),
                 comm_cpu = gather(comm, median(p.comm_cpu)), alone_step = gather(comm, median(alone[i].step));
      // A balanced pipeline takes (M + K - 1) / M of its slowest stage's compute.
      const double alone_ideal =
          *std::max_element(alone_step.begin(), alone_step.end()) * (m + k - 1) / static_cast<double>(m);
      t.rows.push_back({pipeline_schedule_name(kSchedules[s]), std::to_string(m), bench::fmt(st * 1e3, "%.1f"),
                        bench::fmt(sps, "%.0f"),
                        bench::fmt(sps * fps / 1e9, "%.1f") + " (" + bench::fmt(ceiling, "%.0f") + ")",
                        bench::fmt(sps / sps1[0]), bench::fmt(ideal), bench::fmt(100 * sps / sps1[0] / ideal, "%.0f%%"),
                        bench::fmt(sps / sps1[i]), bench::fmt(100 * sps / sps1[i] / ideal, "%.0f%%"),
                        per_rank(alone_step, 1e3, "%.1f"), bench::fmt(100 * alone_ideal / st, "%.0f%%"),
                        per_rank(compute, 1e3, "%.1f"), per_rank(wait, 1e3, "%.1f"), per_rank(comm_cpu, 1e3, "%.1f"),
                        per_rank(peak, 1e-6, "%.1f"), per_rank(in_flight, 1, "%.0f")});
    }
  return t;
}

// The header: the CPU, the run's configuration, the machine's load around it (and whether the
// ranks oversubscribe its cores), and what GFLOP/s counts.
void print_header(int k, const Config& c, const std::string& load_at_start, const std::string& load_at_end) {
  bench::print_cpu_line();
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf(
      "bench/pipeline: %d ranks (stages of %d blocks), %d math thread(s) per rank, model %d x [Linear(%lld, %lld) "
      "+ "
      "Tanh], MSE loss, batch %lld, SGD; %d rounds x %d timed steps per row (%d warm-up), medians over rounds\n",
      k, kBlocks / k, get_num_threads(), kBlocks, static_cast<long long>(c.hidden), static_cast<long long>(c.hidden),
      static_cast<long long>(c.batch), c.rounds, c.steps, c.warmup);
  std::printf("load average (1, 5, 15 min): %s at start, %s at end; %ld online cores\n", load_at_start.c_str(),
              load_at_end.c_str(), cores);
  if (k * get_num_threads() > cores)
    std::printf(
        "OVERSUBSCRIBED: %d ranks x %d thread(s) on %ld cores; the ranks share cores, so these numbers measure "
        "the machine, not the pipeline\n",
        k, get_num_threads(), cores);
  std::printf(
      "GFLOP/s counts the Linear layers' GEMMs (6 H^2 per sample per block, forward and backward); its ceiling "
      "is K x the 1-thread GEMM rate at the micro-batch's shape, measured on rank 0 in this run\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(argc, argv,
                              "usage: %s [steps=4] [rounds=5] [hidden=1024] [batch=256]\n\nPipeline-parallel "
                              "training throughput (8 equal Linear+Tanh blocks, GPipe and 1F1B, M in 1..16) on MPI "
                              "ranks against one process; run it as: ember launch -n 2 -- build/bench/pipeline\n"))
      return 0;
    Config c;
    if (argc > 1) c.steps = std::max(1, std::atoi(argv[1]));
    if (argc > 2) c.rounds = std::max(1, std::atoi(argv[2]));
    if (argc > 3) c.hidden = std::max(1, std::atoi(argv[3]));
    if (argc > 4) c.batch = std::max(16, std::atoi(argv[4]));
    if (!std::getenv("OMP_NUM_THREADS")) set_num_threads(1);
    MpiCommunicator comm;
    const int k = comm.size();
    const std::string load_at_start = load_average();
    if (kBlocks % k != 0) {
      if (comm.rank() == 0)
        std::fprintf(stderr, "bench/pipeline: %d blocks do not split into %d equal stages; run on 1, 2, 4 or 8 ranks\n",
                     kBlocks, k);
      return 2;
    }

    auto model = make_model(c.hidden);
    Generator g(2);
    const Tensor x = randn({c.batch, c.hidden}, {}, &g), y = randn({c.batch, c.hidden}, {}, &g);
    const size_t nm = std::size(kMicroBatches);
    std::vector<Samples> ref(nm), pipe(nm * 2), alone(nm);
    std::vector<std::vector<double>> gemm(nm);
    for (int r = 0; r < c.rounds; ++r) {
      for (size_t i = 0; i < nm; ++i) {
        const int m = kMicroBatches[i];
        if (comm.rank() == 0) {
          run_reference(*model, m, c, x, y, ref[i]);
          gemm[i].push_back(gemm_gflops(c.batch / m, c.hidden));
        }
        idle_until(comm.barrier("reference done"));
        for (size_t s = 0; s < 2; ++s) run_pipeline(*model, comm, kSchedules[s], m, c, x, y, pipe[i * 2 + s]);
        run_alone_at_once(*model, comm, m, c, x, y, alone[i]);
      }
    }
    const std::string load_at_end = load_average();

    // Rank 0 holds the references; every rank takes part in the gathers.
    const double fps = flops_per_sample(c.hidden);
    bench::Table rt{{"1 process", "M", "rows per micro-batch", "step ms", "samples/s", "GFLOP/s",
                     "1-thread GEMM GFLOP/s at [rows x H].[H x H]", "peak MB"}};
    std::vector<double> sps1(nm);
    for (size_t i = 0; i < nm; ++i) {
      const double st = median(ref[i].step);
      sps1[i] = static_cast<double>(c.batch) / st;
      rt.rows.push_back({i == 0 ? "whole batch (reference)" : "micro-batches, gradient accumulated",
                         std::to_string(kMicroBatches[i]), std::to_string(c.batch / kMicroBatches[i]),
                         bench::fmt(st * 1e3, "%.1f"), bench::fmt(sps1[i], "%.0f"),
                         bench::fmt(sps1[i] * fps / 1e9, "%.1f"), bench::fmt(median(gemm[i]), "%.1f"),
                         bench::fmt(median(ref[i].peak) / 1e6, "%.1f")});
    }
    const bench::Table t = pipeline_table(comm, c, pipe, alone, gemm, sps1);
    if (comm.rank() == 0) {
      print_header(k, c, load_at_start, load_at_end);
      rt.print();
      std::printf("\n");
      t.print();
    }
    return 0;
  });
}
