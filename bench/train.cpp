// bench/train: training throughput of the example models (MnistCnn at batch 64, the MLP GAN and
// the DCGAN, one D step plus one G step per iteration as the examples take them) with 1 and 2
// threads, beside the same model, batch, optimizer and thread count in libtorch measured in the
// same run (when libtorch was found at configure time); and the DataLoader alone on MNIST-format
// data (Fashion-MNIST from Debian), augmentation off. Rates are medians of several timed runs
// after warm-up. Ratio = Ember rate / libtorch rate: above 1.00 Ember is faster. libtorch inside
// this process runs at about half its standalone speed; bench/compare_torch.sh runs each engine in
// its own process, alternating, and is the comparison to quote.
//   train [--reps N] [--models mnist_cnn,mlp_gan,dcgan] [--threads 1,2] [--data DIR] [--no-loader]
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/ember_steps.h"
#include "bench/train_torch.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/mnist_cnn.h"

using namespace ember;
using namespace ember::bench;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

// Steps per timed run, so that one run lasts about a second on this kind of machine.
int steps_per_run(const std::string& model) {
  return model == "mnist_cnn" ? 40 : model == "mlp_gan" ? 100 : 3;
}

// Median steps/s of `reps` runs of `steps` steps after one warm-up run.
double rate(const std::function<void()>& step, int steps, int reps) {
  double sec = median_seconds(
      [&] {
        for (int i = 0; i < steps; ++i) step();
      },
      reps, 1);
  return steps / sec;
}

// The command line.
struct Args {
  int reps = 5;
  std::vector<std::string> model_list = {"mnist_cnn", "mlp_gan", "dcgan"};
  std::vector<int> thread_list = {1, 2};
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  bool loader = true;
};

// Reads the command line into `args`; -1 to go on, else the status to exit with (0 after --help).
int parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--reps") {
      args.reps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--models") {
      args.model_list = split(next());
    } else if (a == "--threads") {
      args.thread_list.clear();
      for (auto& t : split(next())) args.thread_list.push_back(std::max(1, std::atoi(t.c_str())));
    } else if (a == "--data") {
      args.data_dir = next();
    } else if (a == "--no-loader") {
      args.loader = false;
    } else {
      // --help: the usage on stdout and status 0, as every bench program; anything else is an error.
      const bool help = a == "--help" || a == "-h";
      std::fprintf(help ? stdout : stderr,
                   "%susage: train [--reps N] [--models mnist_cnn,mlp_gan,dcgan] [--threads 1,2] [--data DIR] "
                   "[--no-loader]\n",
                   help ? "" : ("train: unknown argument '" + a + "'\n").c_str());
      return help ? 0 : 2;
    }
  }
  for (const auto& m : args.model_list)
    if (m != "mnist_cnn" && m != "mlp_gan" && m != "dcgan") {
      std::fprintf(stderr, "train: unknown model '%s'\n", m.c_str());
      return 2;
    }
  return -1;
}

// The training table: each model at each thread count, Ember beside libtorch.
void print_training_table(const Args& args) {
  Table t{{"model", "batch", "threads", "Ember", "libtorch", "ratio"}, {}};
  for (const auto& m : args.model_list) {
    const int batch = 64, steps = steps_per_run(m);
    const bool per_sample = m == "mnist_cnn";
    for (int th : args.thread_list) {
      set_num_threads(th);
      double er = rate(ember_train_step(m), steps, args.reps) * (per_sample ? batch : 1);
      double tr = 0;
      if (torch_available()) {
        tr = rate(torch_train_step(m, batch, th), steps, args.reps) * (per_sample ? batch : 1);
        set_num_threads(th);
      }
      const char* unit = per_sample ? " samples/s" : " it/s";
      const char* f = er < 10 ? "%.2f" : "%.1f";  // DCGAN runs at a few iterations per second
      t.rows.push_back({m, std::to_string(batch), std::to_string(th), fmt(er, f) + unit,
                        tr > 0 ? fmt(tr, f) + unit : "-", tr > 0 ? fmt(er / tr) : "-"});
      std::fprintf(stderr, "  done: %s, %d threads\n", m.c_str(), th);
    }
  }
  t.print();
}

// The DataLoader alone over one epoch of the MNIST-format data in args.data_dir, when it is there.
void print_loader_table(const Args& args) {
  if (!data::MNIST::available(args.data_dir)) {
    std::printf("\nDataLoader: no MNIST-format files in %s; skipped.\n", args.data_dir.c_str());
    return;
  }
  data::MNIST ds(args.data_dir, data::Split::Train, {.normalize = std::make_pair(0.2860, 0.3530)});
  std::printf(
      "\nDataLoader alone: %s, %lld images, batch 64, shuffled, augmentation off; images/s over one "
      "epoch (median of %d epochs after one warm-up epoch); target 50,000 images/s\n\n",
      args.data_dir.c_str(), (long long)ds.size(), args.reps);
  Table lt{{"workers", "math threads", "images/s", "vs target"}, {}};
  for (int workers : {0, 1, 2}) {
    set_num_threads(1);
    data::DataLoader dl(ds, {.batch_size = 64, .shuffle = true, .workers = workers, .seed = 1});
    double sec = median_seconds(
        [&] {
          int64_t n = 0;
          for (auto& [x, y] : dl) n += y.numel();
          if (n != ds.size()) std::abort();
        },
        args.reps, 1);
    const double r = static_cast<double>(ds.size()) / sec;
    lt.rows.push_back({std::to_string(workers), "1", fmt(r, "%.0f"), fmt(r / 50000.0)});
  }
  lt.print();
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    Args args;
    if (const int status = parse_args(argc, argv, args); status >= 0) return status;
    print_cpu_line();
    std::printf("bench/train: median of %d runs after a warm-up run; %s\n\n", args.reps,
                torch_available() ? "libtorch measured in this process, where it runs at about half its standalone "
                                    "speed: bench/compare_torch.sh gives the honest ratio"
                                  : "libtorch not found at build time");
    print_training_table(args);
    if (args.loader) print_loader_table(args);
    return 0;
  });
}
