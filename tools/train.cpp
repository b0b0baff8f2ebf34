// `ember train FILE [flags]`: trains the classifier a model file (interop/model_file.h, schema
// proto/train_file.proto) describes, with the examples' loop (examples/common: progress bar,
// metrics log, evaluation after every epoch, checkpoints, --resume, SIGINT/SIGTERM, --tensorboard,
// --data-parallel under `ember launch`) — mnist_cnn with its network, optimizer and settings read
// from the file. Every flag overrides the file's value of the same name.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/classifier.h"
#include "common/parallel_job.h"
#include "interop/model_file.h"
#include "tools/command.h"

namespace ember::cli {
namespace {

const char* const kDescription =
    "Trains the classifier a model file describes (its network, MNIST-format data, optimizer and\n"
    "settings; docs/INTEROP.md). Flags override the file. Example: ember train models/mnist_cnn.pbtxt";

// The file's settings as the flags' defaults: the flags given on the command line win.
void apply_file_defaults(const train_file::TrainFile& s, examples::Flags& flags, examples::CommonFlags& cf) {
  const auto& d = s.data();
  if (!flags.given("data") && !d.mnist().dir().empty()) cf.data = d.mnist().dir(), cf.data_given = true;
  if (!flags.given("seed")) cf.seed = s.training().seed();
  if (!flags.given("limit") && d.has_limit()) cf.limit = d.limit();
  if (!flags.given("workers") && d.workers() > 0) cf.workers = d.workers();
  if (!flags.given("max-steps") && s.training().has_max_steps()) cf.max_steps = s.training().max_steps();
  if (!flags.given("tensorboard") && !s.training().tensorboard().empty())
    cf.tensorboard.dir = s.training().tensorboard();
}

double solver_lr(const train_file::Solver& solver) {
  return solver.has_adam() ? solver.adam().lr() : solver.has_sgd() ? solver.sgd().lr() : 0.0;
}

int train_classifier(const model_file::LoadedFile& file, const std::vector<std::string>& args) {
  const auto& s = file.spec;
  const auto& c = s.classifier();
  const int net_index = model_file::network_index(file, c.network(), "classifier");
  std::vector<std::string> words{"ember train " + file.path};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  examples::Flags flags(static_cast<int>(argv.size()), argv.data(), kDescription);
  const double file_lr = solver_lr(c.solver());
  examples::CommonFlags cf(
      flags, s.training().epochs() > 0 ? s.training().epochs() : 1,
      s.data().batch_size() > 0 ? s.data().batch_size() : 64, file_lr > 0 ? file_lr : 1e-3, s.name(),
      {.lr = "learning rate (the file's by default)",
       .checkpoint_dir = s.training().checkpoint_dir().empty() ? "runs/" + s.name() : s.training().checkpoint_dir()});
  const bool summary_only = flags.boolean("summary", false, "print the network's summary and exit");
  examples::ParallelJob job("ember train", examples::ParallelFlags(flags));
  flags.finish();
  apply_file_defaults(s, flags, cf);
  cf.check(flags);
  try {
    const auto& n = s.network(net_index);
    Shape example{1};
    example.insert(example.end(), n.input_shape().begin(), n.input_shape().end());
    if (summary_only) {
      manual_seed(static_cast<uint64_t>(cf.seed));
      std::printf("%s", model_file::build_network(file, net_index)->summary(example).c_str());
      return 0;
    }
    const Device dev = job.start(cf.dev());
    cf.prepare(flags);
    const auto& m = s.data().mnist();
    data::MnistOptions mopts{
        .normalize = std::make_pair(m.has_mean() ? m.mean() : 0.1307, m.has_std() ? m.std() : 0.3081),
        .transform = nullptr,
        .limit = cf.limit};
    data::MNIST train_set(cf.data_root, data::Split::Train, mopts), test_set(cf.data_root, data::Split::Test, mopts);
    manual_seed(static_cast<uint64_t>(cf.seed));
    std::shared_ptr<nn::Module> net = model_file::build_network(file, net_index);
    net->to(dev);
    job.wrap(*net, cf.batch_size, static_cast<uint64_t>(cf.seed),
             Shape(n.input_shape().begin(), n.input_shape().end()));
    auto opt = model_file::make_optimizer(file, c.solver(), "classifier", job.parameters(*net),
                                          flags.given("lr") ? cf.lr : 0.0);
    auto schedule = model_file::make_schedule(c.solver(), *opt);
    data::DataLoader loader(train_set, job.loader_options({.batch_size = cf.batch_size,
                                                           .shuffle = true,
                                                           .workers = static_cast<int>(cf.workers),
                                                           .seed = static_cast<uint64_t>(cf.seed)}));
    std::map<std::string, std::string> meta = cf.settings();
    meta.insert({{"model", s.name()}, {"model_file", file.path}, {"data", cf.data_name}});
    examples::TrainerOptions topts = examples::trainer_options(cf, examples::classifier_columns());
    topts.say_checkpoint_written = true;
    TrainingState state{net.get(), {opt.get()}, {{"default", &default_generator()}}, {}};
    if (schedule) state.schedulers.push_back(schedule.get());
    examples::Trainer trainer(topts, state, loader, meta, &job);
    trainer.resume();
    std::printf("Training %s (%s) on %s (%lld examples) on %s: %lld epochs, batch %lld\n", s.name().c_str(),
                file.path.c_str(), cf.data_name.c_str(), (long long)train_set.size(),
                examples::device_label(dev).c_str(), cf.epochs, cf.batch_size);
    if (job.chatty()) std::printf("%s", net->summary(example).c_str());
    job.print_summary();
    auto step = [&](const Tensor& x, const Tensor& y, examples::RunningSums& sums) {
      return examples::classifier_step(*net, *opt, dev, &job, x, y, sums);
    };
    auto end_epoch = [&](const examples::EpochEnd& e) {
      auto [acc, loss] = examples::evaluate_classifier(*net, test_set, dev, 256, &job);
      examples::classifier_summary(e, acc, loss, trainer.log());
      if (schedule) schedule->step();
    };
    auto write_model = [&] {
      if (cf.checkpoint_dir.empty()) return;
      job.gather_model();
      if (!job.chatty()) return;
      const std::string out = (std::filesystem::path(cf.checkpoint_dir) / (s.name() + ".ckpt")).string();
      save(*net, out);
      std::printf("Model written to %s\n", out.c_str());
    };
    return trainer.fit({.step = step, .end_epoch = end_epoch}, write_model);
  } catch (const std::exception& e) {
    return job.fail(e);
  }
}

}  // namespace

int train(const std::vector<std::string>& args) {
  if (args.empty() || args[0].starts_with("-")) {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
    (help ? std::cout : std::cerr) << "usage: ember train FILE [flags]\n\n"
                                   << kDescription << "\n\nRun 'ember train FILE --help' for the flags.\n";
    return help ? 0 : 2;
  }
  model_file::LoadedFile file;
  try {
    file = model_file::load(args[0]);
    if (file.spec.task_case() == train_file::TrainFile::kGan) {
      // Read, checked and built, not trained: the summary of each network is what it can give.
      if (args.size() == 2 && args[1] == "--summary") {
        for (int i = 0; i < file.spec.network_size(); ++i) {
          Shape example{1};
          example.insert(example.end(), file.spec.network(i).input_shape().begin(),
                         file.spec.network(i).input_shape().end());
          std::printf("%s:\n%s", file.spec.network(i).name().c_str(),
                      model_file::build_network(file, i)->summary(example).c_str());
        }
        return 0;
      }
      EMBER_FAIL(file.at_top("gan"),
                 ": training a GAN from a model file is not built yet (the file is read and checked, and "
                 "--summary builds its networks); train the GANs with examples/mnist_gan and mnist_dcgan");
    }
  } catch (const Error& e) {
    std::cerr << "ember train: " << e.what() << "\n";
    return 1;
  }
  return train_classifier(file, std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace ember::cli
