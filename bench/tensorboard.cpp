// bench/tensorboard: what --tensorboard costs a training step. Each workload trains in blocks of
// steps, alternating a block without a SummaryWriter (the reference) and a block that logs what
// the examples' Trainer logs: four scalars every step and every parameter's and gradient's
// histogram every --every steps. The table gives the median over rounds of the per-round ratio
// (with / without) and its range.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/parallel.h"
#include "interop/summary_writer.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/mnist_cnn.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct Workload {
  std::string name;
  int steps;          // per block
  nn::Module* model;  // whose parameters are logged
  std::vector<optim::Optimizer*> optimizers;
  std::function<double()> step;  // one training step; returns its loss
};

// Seconds for `steps` steps, logging to `w` (null: no logging) from global step `first`.
double block(Workload& wl, SummaryWriter* w, int64_t first, int every) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < wl.steps; ++i) {
    const double loss = wl.step();
    if (!w) continue;
    const int64_t s = first + i;
    w->add_scalar("step/loss", loss, s);
    w->add_scalar("step/acc", 0.5, s);
    w->add_scalar("step/samples_per_s", 1000.0, s);
    w->add_scalar("step/lr", wl.optimizers[0]->param_groups()[0].options.at("lr"), s);
    if (s % every == 0)
      for (const auto& [name, p] : wl.model->named_parameters()) {
        w->add_histogram("weights/" + name, p, s);
        if (p.grad().defined()) w->add_histogram("grads/" + name, p.grad(), s);
      }
  }
  return bench::seconds(std::chrono::steady_clock::now() - t0);
}

// Workload wl's row: steps/s without and with a SummaryWriter logging scalars each step and
// histograms every `every` steps (into dir), in `rounds` alternating pairs of blocks after a warm-up.
std::vector<std::string> overhead_row(Workload& wl, const fs::path& dir, int rounds, int every) {
  block(wl, nullptr, 0, every);  // warm-up
  SummaryWriter w(dir.string());
  std::vector<double> without, with, ratio;
  int64_t step = 0;
  for (int r = 0; r < rounds; ++r) {
    const double a = block(wl, nullptr, step, every);
    const double b = block(wl, &w, step, every);
    step += wl.steps;
    without.push_back(a), with.push_back(b), ratio.push_back(b / a);
  }
  w.close();
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  return {wl.name,
          bench::fmt(wl.steps / bench::median(without), "%.1f"),
          bench::fmt(wl.steps / bench::median(with), "%.1f"),
          bench::fmt((bench::median(ratio) - 1) * 100, "%+.2f%%"),
          bench::fmt((*lo - 1) * 100, "%+.1f") + " .. " + bench::fmt((*hi - 1) * 100, "%+.1f%%"),
          bench::fmt(static_cast<double>(fs::file_size(w.file())) / 1e6, "%.1f MB")};
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(argc, argv,
                              "usage: %s [rounds] [every]\n  rounds: alternating pairs of blocks (default 5); every: "
                              "steps between histograms (default 25; the examples' default is 100)\n"))
      return 0;
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5, every = argc > 2 ? std::atoi(argv[2]) : 25;
    if (rounds < 1 || every < 1) {
      std::fprintf(stderr, "%s: rounds and every must be positive\n", argv[0]);
      return 2;
    }
    bench::print_cpu_line();
    std::printf("threads: %d, rounds: %d, histograms every %d steps\n", get_num_threads(), rounds, every);
    manual_seed(0);

    models::MnistCnn cnn;
    optim::Adam cnn_opt(cnn.parameters(), {.lr = 1e-3});
    const Tensor images = randn({64, 1, 28, 28});
    const Tensor labels = randint(0, 10, {64}, {.dtype = DType::Int64});

    models::DcganGenerator gen;
    models::DcganDiscriminator disc;
    nn::Sequential gan;  // both networks, for the histograms
    gan.push_back("generator", std::shared_ptr<nn::Module>(std::shared_ptr<void>(), &gen));
    gan.push_back("discriminator", std::shared_ptr<nn::Module>(std::shared_ptr<void>(), &disc));
    optim::Adam g_opt(gen.parameters(), {.lr = 1e-4, .beta1 = 0.5}),
        d_opt(disc.parameters(), {.lr = 1e-4, .beta1 = 0.5});
    const Tensor real = rand({64, 1, 28, 28}) * 2 - 1;
    const Tensor ones_t = ones({64, 1}), zeros_t = zeros({64, 1});

    std::vector<Workload> workloads{
        {"MnistCnn, batch 64",
         200,
         &cnn,
         {&cnn_opt},
         [&] {
           Tensor loss = cross_entropy(cnn(images), labels);
           cnn_opt.zero_grad();
           loss.backward();
           cnn_opt.step();
           return loss.item();
         }},
        {"DCGAN, batch 64",
         12,
         &gan,
         {&g_opt, &d_opt},
         [&] {
           Tensor fake = gen(randn({64, models::kNoiseDim}));
           Tensor ld = nn::binary_cross_entropy_with_logits(disc(real), ones_t) +
                       nn::binary_cross_entropy_with_logits(disc(fake.detach()), zeros_t);
           d_opt.zero_grad();
           ld.backward();
           d_opt.step();
           Tensor lg = nn::binary_cross_entropy_with_logits(disc(fake), ones_t);
           g_opt.zero_grad();
           lg.backward();
           g_opt.step();
           return lg.item();
         }},
    };

    const fs::path dir = fs::temp_directory_path() / ("ember_bench_tb_" + std::to_string(::getpid()));
    bench::Table t;
    t.header = {"workload",          "steps/s without", "steps/s with --tensorboard",
                "overhead (median)", "range",           "event file"};
    for (Workload& wl : workloads) {
      t.rows.push_back(overhead_row(wl, dir, rounds, every));
    }
    fs::remove_all(dir);
    t.print();
    return 0;
  });
}
