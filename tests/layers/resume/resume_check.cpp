// The exact-resume check of the training API, as a program that ctest runs several times
// (resume_test.sh): it trains a small CNN (batch norm, dropout from the default generator, Adam,
// a step LR schedule) on a shuffling, augmenting DataLoader with worker threads for --steps
// optimizer steps, optionally starting from a training checkpoint (--load) and optionally
// writing one at the end (--save), and dumps every parameter and buffer, bit for bit, to --out.
// Running N + M steps straight and N steps, save, then M steps in a fresh process must give
// identical dumps. --skip-rng, --skip-loader and --skip-schedule each leave out one part of the
// restore, so the script can show that the comparison catches a resume that is not exact.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>

#include "data/dataloader.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"

using namespace ember;

namespace {

struct Net : nn::Module {
  nn::Conv2d conv{1, 4, 3, {.padding = 1}};
  nn::BatchNorm2d bn{4};
  nn::Dropout drop{0.3};
  nn::Linear fc{4 * 4 * 4, 3};
  Net() { register_modules({{"conv", &conv}, {"bn", &bn}, {"drop", &drop}, {"fc", &fc}}); }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(bn(conv(x))), 2).flatten(1);
    return fc(drop(h));
  }
};

struct Args {
  int64_t steps = 0;
  std::string load, save, out;
  bool skip_rng = false, skip_loader = false, skip_schedule = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      EMBER_CHECK(i + 1 < argc, "resume_check: ", k, " needs a value");
      return argv[++i];
    };
    if (k == "--steps")
      a.steps = std::stoll(value());
    else if (k == "--load")
      a.load = value();
    else if (k == "--save")
      a.save = value();
    else if (k == "--out")
      a.out = value();
    else if (k == "--skip-rng")
      a.skip_rng = true;
    else if (k == "--skip-loader")
      a.skip_loader = true;
    else if (k == "--skip-schedule")
      a.skip_schedule = true;
    else
      EMBER_CHECK(false, "resume_check: unknown argument '", k, "'");
  }
  EMBER_CHECK(a.steps >= 0 && !a.out.empty(), "resume_check: usage: --steps K --out FILE [--load F] [--save F]");
  return a;
}

void dump(const nn::Module& m, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EMBER_CHECK(f != nullptr, "resume_check: cannot write '", path, "'");
  for (const auto& [name, t] : m.state_dict()) {
    Tensor c = t.contiguous();
    std::fprintf(f, "%s %s\n", name.c_str(), shape_str(c.shape()).c_str());
    std::fwrite(c.raw_data(), 1, static_cast<size_t>(c.numel()) * c.itemsize(), f);
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);

  // A fixed synthetic data set: 3 classes of 8x8 images with a class-dependent bright square.
  Generator data_gen(7);
  Tensor labels = randint(0, 3, {90}, {.dtype = DType::Int64}, &data_gen);
  Tensor images = randn({90, 1, 8, 8}, {}, &data_gen) * 0.5;
  {
    auto lv = labels.to_vector<int64_t>();
    for (int64_t i = 0; i < 90; ++i) images[i].narrow(1, 2 * lv[i], 3).narrow(2, 2, 3).add_(1.0);
  }
  // Per-example augmentation noise drawn from the loader's per-example generator.
  data::TensorDataset ds(images, labels,
                         [](const Tensor& x, Generator& g) { return x + randn(x.shape(), {}, &g) * 0.1; });
  data::DataLoader loader(ds, {.batch_size = 16, .shuffle = true, .workers = 2, .seed = 5});

  // A fresh process that loads a checkpoint starts from other weights, which the load replaces.
  manual_seed(args.load.empty() ? 1 : 999);
  Net net;
  optim::Adam opt(net.parameters(), {.lr = 1e-2});
  optim::StepLR sched(opt, 4, 0.5);

  int64_t step = 0;
  if (!args.load.empty()) {
    std::vector<std::pair<std::string, Generator*>> gens;
    if (!args.skip_rng) gens.emplace_back("default", &default_generator());
    std::vector<ScheduleRef> schedules;
    if (!args.skip_schedule) schedules.emplace_back(&sched);
    TrainingPosition pos;
    std::map<std::string, std::string> meta;
    if (args.skip_schedule) {
      // The file holds a schedule the program does not restore: read around it.
      CheckpointContents c = read_checkpoint(args.load);
      c.schedulers.clear();
      const std::string tmp = args.load + ".noschedule";
      write_checkpoint(tmp, c);
      std::tie(pos, meta) = load_training(tmp, {&net, {&opt}, gens, schedules});
    } else {
      std::tie(pos, meta) = load_training(args.load, {&net, {&opt}, gens, schedules});
    }
    EMBER_CHECK(meta.at("program") == "resume_check", "resume_check: '", args.load, "' is not this program's");
    if (!args.skip_loader) loader.set_position({pos.loader_epoch, pos.loader_batch});
    step = pos.step;
  }

  net.train();
  for (int64_t done = 0; done < args.steps;) {
    for (auto& batch : loader) {
      Tensor loss = nn::cross_entropy(net(batch.input), batch.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
      sched.step();
      ++step;
      if (++done == args.steps) break;
    }
  }

  if (!args.save.empty()) {
    const data::LoaderPosition lp = loader.position();
    TrainingPosition pos{.epoch = lp.epoch, .step = step, .loader_epoch = lp.epoch, .loader_batch = lp.batch};
    save_training(args.save, {&net, {&opt}, {{"default", &default_generator()}}, {&sched}}, pos,
                  {{"program", "resume_check"}});
  }
  dump(net, args.out);
  std::cout << "resume_check: " << step << " steps, loader at epoch " << loader.position().epoch << " batch "
            << loader.position().batch << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 1;
}
