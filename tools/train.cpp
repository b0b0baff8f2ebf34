// `ember train FILE [flags]`: trains the classifier, GAN or language model a model file
// (interop/model_file.h, schema proto/train_file.proto) describes, with the training library's loops
// (train/, ember::train: progress bar, metrics log, evaluation after every epoch, checkpoints, --resume,
// SIGINT/SIGTERM, --tensorboard; for one network, --data-parallel under `ember launch`) — mnist_cnn,
// mnist_gan and lstm_lm with their networks, optimizers and settings read from the file. Every flag
// overrides the file's value of the same name.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "data/csv_dataset.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/transforms.h"
#include "interop/model_file.h"
#include "layers/fusion.h"
#include "tools/command.h"
#include "tools/model_file_data.h"
#include "train/classifier.h"
#include "train/gan.h"
#include "train/language_model.h"
#include "train/parallel_job.h"

namespace ember::tools {
namespace {

const char* const kDescription =
    "Trains the classifier, GAN or language model a model file describes (its networks, data, optimizers\n"
    "and settings; docs/INTEROP.md). Flags override the file. Example: ember train models/mnist_cnn.pbtxt";

// The command line as train::Flags reads it: the file's path stands for the program.
struct Argv {
  std::vector<std::string> words;
  std::vector<char*> ptrs;
  Argv(const std::string& file, const std::vector<std::string>& args) : words{"ember train " + file} {
    words.insert(words.end(), args.begin(), args.end());
    for (std::string& w : words) ptrs.push_back(w.data());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
};

// The shape of one batch-of-1 input of network n (what summaries and the shape checks use),
// without making it: a wrong, huge input_shape must reach the check that names it and the data's.
Shape example_shape(const train_file::Network& n) {
  Shape shape{1};
  shape.insert(shape.end(), n.input_shape().begin(), n.input_shape().end());
  return shape;
}

// A classifier's training and test sets, their class labels: how many (1 + the largest) and where
// they come from, for the check against the network's outputs; and what its checkpoints record of
// them (class_record.h).
struct ClassifierData {
  std::unique_ptr<data::Dataset> train, test;
  int64_t classes = 0;
  std::string classes_from;
  std::map<std::string, std::string> record;
};

// Notes a set's number of classes when it exceeds those noted so far, and where it comes from.
void note_classes(ClassifierData& out, int64_t classes, const std::string& from) {
  if (classes > out.classes) out.classes = classes, out.classes_from = from;
}
void note_classes(ClassifierData& out, const data::CsvDataset& set, const std::string& path) {
  note_classes(out, set.num_classes(),
               "CSV '" + path + "' line " + std::to_string(set.largest_label_line()) + " holds class label " +
                   std::to_string(set.num_classes() - 1));
}
void note_classes(ClassifierData& out, const data::ImageFolder& set, const std::string& path) {
  const auto n = static_cast<int64_t>(set.classes().size());
  note_classes(out, n, "the image folder " + path + " has " + std::to_string(n) + " classes");
}

// The classifier's network, built and checked against the data's class labels: a label beyond its
// outputs would stop training inside cross_entropy, naming neither the data nor the network.
std::shared_ptr<nn::Module> classifier_network(const model_file::LoadedFile& file, int net_index,
                                               const ClassifierData& d) {
  std::shared_ptr<nn::Module> net = model_file::build_network(file, net_index);
  nn::fuse(*net);  // a file's conv, [relu,] max_pool2d run as one op, as the examples' (layers/fusion.h)
  const int64_t outputs = model_file::classifier_outputs(file, net_index, *net);
  EMBER_CHECK(d.classes <= outputs, d.classes_from, ", but network '", file.spec.network(net_index).name(), "' (",
              file.at(net_index), ") scores ", outputs, " classes (expected one output per class: ", d.classes, ")");
  return net;
}

// What a classifier's checkpoints record besides the settings: the model, the model file by its
// absolute path (`ember eval` and `ember predict` rebuild the network from it), the data, and
// their classes and normalisation.
std::map<std::string, std::string> checkpoint_record(const model_file::LoadedFile& file, const std::string& data_name,
                                                     const ClassifierData& sets) {
  std::map<std::string, std::string> r = sets.record;
  r.insert({{"model", file.spec.name()},
            {"model_file", std::filesystem::absolute(file.path).lexically_normal().string()},
            {"data", data_name}});
  return r;
}

// The training images' random transforms (data.augment), or none.
data::Transform augmentation(const model_file::LoadedFile& file, int64_t height, int64_t width) {
  const auto& a = file.spec.data().augment();  // model_file::load() checked its ranges
  std::vector<data::Transform> ts;
  if (a.crop_padding() > 0) ts.push_back(data::transforms::random_crop(height, width, a.crop_padding()));
  if (a.horizontal_flip() > 0) ts.push_back(data::transforms::random_horizontal_flip(a.horizontal_flip()));
  if (a.affine_degrees() > 0 || a.affine_translate() > 0)
    ts.push_back(data::transforms::random_affine(a.affine_degrees(), a.affine_translate()));
  if (ts.empty()) return nullptr;
  return data::transforms::compose(std::move(ts));
}

// The data source of the file (MNIST: through the examples' --data rules), after which the
// checkpoint folder is prepared (bad data leave no empty folder behind).
ClassifierData classifier_data(const model_file::LoadedFile& file, train::Flags& flags, train::CommonFlags& cf) {
  const auto& d = file.spec.data();
  ClassifierData out;
  auto limited = [&](std::unique_ptr<data::Dataset> ds) -> std::unique_ptr<data::Dataset> {
    if (cf.limit < 0) return ds;
    return std::make_unique<data::FirstN>(std::move(ds), cf.limit);
  };
  auto resolve = [&](const std::string& p, const char* what) {
    EMBER_CHECK(!p.empty(), file.at_top("data"), ": data.", what, " is missing (expected a path)");
    return file.resolve(p);
  };
  if (d.has_mnist()) {
    cf.prepare();
    data::MnistOptions mopts{.normalize = mnist_normalize(file), .transform = nullptr, .limit = cf.limit};
    note_classes(out, 10, cf.data_name + " has 10 classes");
    out.record = train::class_record(train::mnist_class_names(cf.data_name), mopts.normalize);
    out.test = std::make_unique<data::MNIST>(cf.data_root, data::Split::Test, mopts);
    mopts.transform = augmentation(file, 28, 28);
    out.train = std::make_unique<data::MNIST>(cf.data_root, data::Split::Train, mopts);
    return out;
  }
  if (flags.given("data"))
    flags.fail("--data names an MNIST folder; this file's data are " +
               std::string(d.has_csv() ? "CSV files" : "image folders"));
  if (d.has_image_folder()) {
    const auto& f = d.image_folder();
    data::ImageFolderOptions o = image_folder_options(file);
    const std::string train = resolve(f.train(), "image_folder.train"), test = resolve(f.test(), "image_folder.test");
    data::ImageFolderOptions train_o = o;
    if (data::Transform aug = augmentation(file, f.height(), f.width()))
      train_o.transform = o.transform ? data::transforms::compose({aug, o.transform}) : aug;
    auto train_set = std::make_unique<data::ImageFolder>(train, train_o);
    note_classes(out, *train_set, train);
    out.record = train::class_record(train_set->classes(), image_folder_normalize(file));
    o.classes = train_set->classes();  // the test images labelled as the training ones
    auto test_set = std::make_unique<data::ImageFolder>(test, o);
    note_classes(out, *test_set, test);
    out.test = limited(std::move(test_set));
    out.train = limited(std::move(train_set));
    cf.data_root = train, cf.data_name = "the image folder " + train;
  } else {
    EMBER_CHECK(!d.has_augment(), file.at_top("data"), ": data.augment applies to images, not CSV rows");
    const auto& c = d.csv();
    data::CsvOptions o{.label_column = c.label_column()};
    const std::string train = resolve(c.train(), "csv.train"), test = resolve(c.test(), "csv.test");
    auto train_set = std::make_unique<data::CsvDataset>(train, o),
         test_set = std::make_unique<data::CsvDataset>(test, o);
    note_classes(out, *train_set, train);
    note_classes(out, *test_set, test);
    out.train = limited(std::move(train_set));
    out.test = limited(std::move(test_set));
    out.record = train::class_record({}, std::nullopt);
    cf.data_root = train, cf.data_name = "the CSV file " + train;
  }
  train::prepare_output_dir("checkpoint-dir", cf.checkpoint_dir, cf.resume.empty(), cf.overwrite);
  return out;
}

// The file's settings as the flags' defaults: the flags given on the command line win.
void apply_file_defaults(const model_file::LoadedFile& file, train::Flags& flags, train::CommonFlags& cf) {
  const auto& s = file.spec;
  const auto& d = s.data();
  if (!flags.given("data") && !d.mnist().dir().empty()) cf.data = file.resolve(d.mnist().dir()), cf.data_given = true;
  if (!flags.given("seed")) cf.seed = s.training().seed();
  if (!flags.given("limit") && d.has_limit()) cf.limit = d.limit();
  if (!flags.given("workers") && d.has_workers()) cf.workers = d.workers();
  if (!flags.given("max-steps") && s.training().has_max_steps()) cf.max_steps = s.training().max_steps();
  if (!flags.given("tensorboard") && !s.training().tensorboard().empty())
    cf.tensorboard.dir = file.resolve(s.training().tensorboard());
  if (!flags.given("precision") && !s.training().precision().empty()) cf.precision = s.training().precision();
}

double solver_lr(const train_file::Solver& solver) {
  return solver.has_adam() ? solver.adam().lr() : solver.has_sgd() ? solver.sgd().lr() : 0.0;
}

// The common flags with the file's epochs, batch size, learning rate (`solver`'s, else `lr_def`) and
// checkpoint folder as their defaults. The file's checkpoint_dir is relative to the file, as its data
// paths are; left out, runs/<name> is the flag's default, in the working directory.
train::CommonFlags common_flags(train::Flags& flags, const model_file::LoadedFile& file,
                                const train_file::Solver& solver, double lr_def, const std::string& lr_help,
                                bool accumulate = true) {
  const train_file::TrainFile& s = file.spec;
  const double file_lr = solver_lr(solver);
  return train::CommonFlags(
      flags, s.training().has_epochs() ? s.training().epochs() : 1,
      s.data().has_batch_size() ? s.data().batch_size() : 64, file_lr > 0 ? file_lr : lr_def, s.name(),
      {.lr = lr_help,
       .checkpoint_dir =
           s.training().checkpoint_dir().empty() ? "runs/" + s.name() : file.resolve(s.training().checkpoint_dir()),
       .accumulate = accumulate});
}

// The model file's settings that a resume must share with its checkpoint, as "setting.*" metadata
// that train::check_resume_settings compares as it compares the flags. A checkpoint restores its
// optimizers' hyperparameters and loads weights by name: an edited weight_decay once resumed with
// the checkpoint's value, and an added dropout (no weights of its own) went unnoticed.
using Settings = std::map<std::string, std::string>;

// Solver `where` ("classifier.solver"): its optimizer as built (the file's values and the defaults
// of those it leaves out) and its schedule. `with_lr`: its rate is not the one flag.lr records.
void add_solver_settings(Settings& meta, const std::string& where, const train_file::Solver& solver,
                         const optim::Optimizer& opt, bool with_lr) {
  const std::string kind = solver.has_adam() ? "adam" : "sgd";
  meta["setting." + where] = kind;
  if (!opt.param_groups().empty())
    for (const auto& [name, v] : opt.param_groups()[0].options)
      if (with_lr || name != "lr") meta["setting." + where + "." + kind + "." + name] = train::exact_number(v);
  const auto& st = solver.step_lr();
  meta["setting." + where + ".step_lr"] =
      solver.has_step_lr() ? "step_size " + std::to_string(st.step_size()) + " gamma " + train::exact_number(st.gamma())
                           : "none";
}

// Network n's layers in order, each with its settings; not its initialisers, which a resume's loaded
// weights replace.
void add_network_settings(Settings& meta, const train_file::Network& n) {
  std::string layers;
  for (train_file::Layer l : n.layer()) {
    l.clear_weight_init();
    l.clear_bias_init();
    layers += (layers.empty() ? "" : "; ") + l.ShortDebugString();
  }
  meta["setting.network." + n.name() + ".layers"] = "[" + layers + "]";
}

// A classifier's loss (classifier.loss) on `dev`.
CrossEntropyOptions classifier_loss(const model_file::LoadedFile& file, const Device& dev) {
  const auto& lf = file.spec.classifier().loss();
  CrossEntropyOptions loss{.label_smoothing = lf.label_smoothing()};
  if (lf.class_weight_size() > 0)
    loss.weight =
        from_vector(std::vector<double>(lf.class_weight().begin(), lf.class_weight().end()), {lf.class_weight_size()})
            .to(dev, DType::Float32);
  return loss;
}

// The command line of a task that trains one network: the file's settings as the common flags'
// defaults, --summary, and the data-parallel flags, read and checked.
struct OneNetworkFlags {
  Argv argv;
  train::Flags flags;
  train::CommonFlags cf;
  bool summary_only;
  train::ParallelJob job;
  OneNetworkFlags(const model_file::LoadedFile& file, const std::vector<std::string>& args,
                  const train_file::Solver& solver, double lr_def)
      : argv(file.path, args),
        flags(argv.argc(), argv.argv(), kDescription),
        cf(common_flags(flags, file, solver, lr_def, "learning rate (the file's by default)")),
        summary_only(flags.boolean("summary", false, "print the network's summary and exit")),
        job("ember train", train::ParallelFlags(flags)) {
    flags.finish();
    apply_file_defaults(file, flags, cf);
    cf.check(flags);
  }
};

int train_classifier(const model_file::LoadedFile& file, const std::vector<std::string>& args) {
  const auto& s = file.spec;
  const auto& c = s.classifier();
  const int net_index = model_file::network_index(file, c.network(), "classifier");
  OneNetworkFlags command(file, args, c.solver(), 1e-3);
  train::Flags& flags = command.flags;
  train::CommonFlags& cf = command.cf;
  train::ParallelJob& job = command.job;
  try {
    const auto& n = s.network(net_index);
    const Shape example = example_shape(n);
    if (command.summary_only) {
      manual_seed(static_cast<uint64_t>(cf.seed));
      std::printf("%s", model_file::build_network(file, net_index)->summary(example).c_str());
      return 0;
    }
    const Device dev = job.start(cf.dev());
    const CrossEntropyOptions loss = classifier_loss(file, dev);
    ClassifierData sets = classifier_data(file, flags, cf);
    const data::Dataset &train_set = *sets.train, &test_set = *sets.test;
    EMBER_CHECK(train_set.size() > 0 && test_set.size() > 0, s.name(), ": the data have ", train_set.size(),
                " training and ", test_set.size(), " test examples (expected some of each)");
    Generator probe(0);
    const Shape data_shape = train_set.get(0, probe).input.shape();
    EMBER_CHECK(data_shape == Shape(n.input_shape().begin(), n.input_shape().end()), file.at(net_index), ": network '",
                n.name(), "' takes examples of ", shape_str(Shape(n.input_shape().begin(), n.input_shape().end())),
                ", but ", cf.data_name, " gives ", shape_str(data_shape), " (expected input_shape to match)");
    manual_seed(static_cast<uint64_t>(cf.seed));
    std::shared_ptr<nn::Module> net = classifier_network(file, net_index, sets);
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
    Settings meta = cf.settings();
    meta.merge(checkpoint_record(file, cf.data_name, sets));
    add_solver_settings(meta, "classifier.solver", c.solver(), *opt, false);
    add_network_settings(meta, n);
    train::TrainerOptions topts = train::trainer_options(cf, train::classifier_columns());
    topts.say_checkpoint_written = true;
    TrainingState state{net.get(), {opt.get()}, {{"default", &default_generator()}}, {}};
    if (schedule) state.schedulers.push_back(schedule.get());
    train::Trainer trainer(topts, state, loader, meta, &job);
    trainer.resume();
    std::printf("Training %s (%s) on %s (%lld examples) on %s: %lld epochs, batch %lld\n", s.name().c_str(),
                file.path.c_str(), cf.data_name.c_str(), (long long)train_set.size(), train::device_label(dev).c_str(),
                cf.epochs, cf.batch_size);
    if (job.chatty()) std::printf("%s", net->summary(example).c_str());
    job.print_summary();
    auto step = [&](const Tensor& x, const Tensor& y, train::RunningSums& sums) {
      return train::classifier_step(*net, *opt, dev, &job, x, y, sums, loss);
    };
    auto end_epoch = [&](const train::EpochEnd& e) {
      auto [acc, loss] = train::evaluate_classifier(*net, test_set, dev, 256, &job);
      train::classifier_summary(e, acc, loss, trainer.log());
      if (schedule) schedule->step();
    };
    auto write_model = [&] {
      if (cf.checkpoint_dir.empty()) return;
      job.gather_model();
      if (!job.chatty()) return;
      const std::string out = (std::filesystem::path(cf.checkpoint_dir) / (s.name() + ".ckpt")).string();
      save(*net, out, meta);  // with what `ember eval` and `ember predict` read
      std::printf("Model written to %s\n", out.c_str());
    };
    return trainer.fit({.step = step, .end_epoch = end_epoch}, write_model);
  } catch (const std::exception& e) {
    return job.fail(e);
  }
}

// Both networks of a GAN file in one module, so that one checkpoint holds both (as GanPair).
class FileGan : public nn::Module {
 public:
  FileGan(std::string name, std::shared_ptr<nn::Module> gen, std::shared_ptr<nn::Module> disc)
      : name_(std::move(name)) {
    register_module("generator", std::move(gen));
    register_module("discriminator", std::move(disc));
  }
  std::string type_name() const override { return name_; }

 private:
  std::string name_;
};

int train_gan(const model_file::LoadedFile& file, const std::vector<std::string>& args) {
  const auto& s = file.spec;
  const auto& g = s.gan();
  const int gi = model_file::network_index(file, g.generator(), "gan");
  const int di = model_file::network_index(file, g.discriminator(), "gan");
  EMBER_CHECK(gi != di, file.at_top("gan"), ": gan names one network as both generator and discriminator");
  EMBER_CHECK(g.noise_dim() > 0, file.at_top("gan"), ": gan.noise_dim is missing (expected a positive number)");
  EMBER_CHECK(example_shape(s.network(gi)) == (Shape{1, g.noise_dim()}), file.at(gi),
              ": the generator's input_shape is ",
              shape_str(Shape(s.network(gi).input_shape().begin(), s.network(gi).input_shape().end())),
              " (expected [noise_dim] = [", g.noise_dim(), "])");
  EMBER_CHECK(example_shape(s.network(di)) == (Shape{1, 1, 28, 28}), file.at(di),
              ": the discriminator's input_shape must be [1, 28, 28] (the MNIST-format images)");
  EMBER_CHECK(s.data().has_mnist(), file.at_top("data"), ": a GAN trains on MNIST-format images (data { mnist {} })");
  for (const auto* solver : {&g.generator_solver(), &g.discriminator_solver()})
    EMBER_CHECK(!solver->has_step_lr(), file.at_top("gan"), ": step_lr in a GAN's solver is not supported yet");
  Argv argv(file.path, args);
  train::Flags flags(argv.argc(), argv.argv(), kDescription);
  train::CommonFlags cf =
      common_flags(flags, file, g.generator_solver(), 2e-4, "learning rate of both networks (the file's by default)",
                   /*accumulate=*/false);
  train::GanLoopFlags lf(flags);
  const bool summary_only = flags.boolean("summary", false, "print the networks' summaries and exit");
  flags.finish();
  apply_file_defaults(file, flags, cf);
  cf.check(flags);
  try {
    if (summary_only) {
      manual_seed(static_cast<uint64_t>(cf.seed));
      for (int i : {gi, di})
        std::printf("%s:\n%s", s.network(i).name().c_str(),
                    model_file::build_network(file, i)->summary(example_shape(s.network(i))).c_str());
      return 0;
    }
    cf.prepare();
    if (lf.samples_dir.empty()) lf.samples_dir = cf.checkpoint_dir;
    manual_seed(static_cast<uint64_t>(cf.seed));
    auto gen = model_file::build_network(file, gi);
    auto disc = model_file::build_network(file, di);
    nn::fuse(*gen), nn::fuse(*disc);
    FileGan pair(s.name(), gen, disc);
    pair.to(cf.dev());
    const double lr = flags.given("lr") ? cf.lr : 0.0;
    auto opt_g = model_file::make_optimizer(file, g.generator_solver(), "gan", gen->parameters(), lr);
    auto opt_d = model_file::make_optimizer(file, g.discriminator_solver(), "gan", disc->parameters(), lr);
    const auto& m = s.data().mnist();
    train::GanParts parts{.pair = pair,
                          .gen = *gen,
                          .disc = *disc,
                          .opt_g = *opt_g,
                          .opt_d = *opt_d,
                          .noise_dim = g.noise_dim(),
                          .normalize = {m.has_mean() ? m.mean() : 0.5, m.has_std() ? m.std() : 0.5},
                          .optimizers = "the file's optimizers",
                          .meta = {{"model_file", file.path}}};
    add_solver_settings(parts.meta, "gan.generator_solver", g.generator_solver(), *opt_g, false);
    add_solver_settings(parts.meta, "gan.discriminator_solver", g.discriminator_solver(), *opt_d, !flags.given("lr"));
    for (int i : {gi, di}) add_network_settings(parts.meta, s.network(i));
    return train::run_gan_loop(cf, lf, s.name(), g.logits(), parts);
  } catch (const std::exception& e) {
    return train::report_failure("ember train", e);
  }
}

// The network of a language-model file (its index), checked against the file's text source.
int language_model_network(const model_file::LoadedFile& file) {
  const auto& s = file.spec;
  const int net_index = model_file::network_index(file, s.language_model().network(), "language_model");
  const auto& text = s.data().text();
  EMBER_CHECK(s.data().has_text(), file.at_top("data"),
              ": a language model reads a text source (data { text { ... } })");
  EMBER_CHECK(text.seq_len() > 0, file.at_top("data"), ": data.text.seq_len is missing (expected the window length)");
  EMBER_CHECK(text.level().empty() || text.level() == "char" || text.level() == "word", file.at_top("data"),
              ": data.text.level is '", text.level(), "' (expected char or word)");
  const auto& n = s.network(net_index);
  EMBER_CHECK(example_shape(n) == (Shape{1, text.seq_len()}), file.at(net_index), ": network '", n.name(),
              "' must take input_shape [seq_len] = [", text.seq_len(), "] (token windows)");
  return net_index;
}

// A language model's checkpoint metadata: what it is and the settings a resume must share.
Settings language_model_meta(const model_file::LoadedFile& file, int net_index, const train::CommonFlags& cf,
                             int64_t vocab_size, const optim::Optimizer& opt) {
  // The model file by its absolute path and the corpus's --limit: what `ember eval` rebuilds.
  Settings meta{{"model", file.spec.name()},
                {"model_file", std::filesystem::absolute(file.path).lexically_normal().string()},
                {"corpus.limit", std::to_string(cf.limit)},
                {"vocab_size", std::to_string(vocab_size)},
                {"flag.lr", train::exact_number(cf.lr)},
                {"flag.seed", std::to_string(cf.seed)},
                {"flag.batch-size", std::to_string(cf.batch_size)}};
  add_solver_settings(meta, "language_model.solver", file.spec.language_model().solver(), opt, false);
  add_network_settings(meta, file.spec.network(net_index));
  return meta;
}

int train_language_model(const model_file::LoadedFile& file, const std::vector<std::string>& args) {
  const auto& s = file.spec;
  const auto& task = s.language_model();
  const int net_index = language_model_network(file);
  const auto& text = s.data().text();
  const auto& n = s.network(net_index);
  OneNetworkFlags command(file, args, task.solver(), 2e-3);
  train::Flags& flags = command.flags;
  train::CommonFlags& cf = command.cf;
  train::ParallelJob& job = command.job;
  const bool summary_only = command.summary_only;
  try {
    const std::string dir = flags.given("data") ? cf.data : text_dir(file);
    const Device dev = job.start(cf.dev());
    train::Corpus c = train::read_corpus(corpus_options(file, dir, cf.limit));
    if (summary_only) {
      manual_seed(static_cast<uint64_t>(cf.seed));
      auto net = model_file::build_network(file, net_index, c.vocab.size());
      std::printf("%s", net->summary(example_shape(n), DType::Int64).c_str());
      return 0;
    }
    data::LanguageModelDataset train_set(c.train_ids, text.seq_len()), test_set(c.test_ids, text.seq_len());
    train::score_baseline(c, test_set);
    manual_seed(static_cast<uint64_t>(cf.seed));
    std::shared_ptr<nn::Module> net = model_file::build_network(file, net_index, c.vocab.size());
    nn::fuse(*net);
    net->to(dev);
    job.wrap(*net, cf.batch_size, static_cast<uint64_t>(cf.seed), {text.seq_len()}, DType::Int64);
    const std::vector<Tensor> params = job.parameters(*net);
    auto opt =
        model_file::make_optimizer(file, task.solver(), "language_model", params, flags.given("lr") ? cf.lr : 0.0);
    auto schedule = model_file::make_schedule(task.solver(), *opt);
    data::DataLoader loader(train_set, job.loader_options({.batch_size = cf.batch_size,
                                                           .shuffle = true,
                                                           .workers = static_cast<int>(cf.workers),
                                                           .seed = static_cast<uint64_t>(cf.seed)}));
    train::TrainerOptions topts = train::trainer_options(cf, train::lm_columns());
    topts.say_checkpoint_written = true;
    TrainingState state{net.get(), {opt.get()}, {{"default", &default_generator()}}, {}};
    if (schedule) state.schedulers.push_back(schedule.get());
    const Settings meta = language_model_meta(file, net_index, cf, c.vocab.size(), *opt);
    train::Trainer trainer(topts, state, loader, meta, &job);
    train::prepare_output_dir("checkpoint-dir", cf.checkpoint_dir, cf.resume.empty(), cf.overwrite);
    if (const auto path = trainer.weights_path();
        path &&
        !train::vocabulary_matches_checkpoint(c.vocab, *path, "ember train", "the file's data.text and --limit"))
      return 1;
    trainer.resume();
    if (!cf.checkpoint_dir.empty() && job.chatty())
      c.vocab.save((std::filesystem::path(cf.checkpoint_dir) / "vocab.txt").string());
    std::printf(
        "Training %s (%s) on %s: %zu fortunes, %zu training tokens, vocabulary %lld, on %s: %lld epochs, "
        "batch %lld x %lld tokens\n",
        s.name().c_str(), file.path.c_str(), dir.c_str(), c.docs, c.train_ids.size(), (long long)c.vocab.size(),
        train::device_label(dev).c_str(), cf.epochs, cf.batch_size, (long long)text.seq_len());
    if (job.chatty()) std::printf("%s", net->summary(example_shape(n), DType::Int64).c_str());
    job.print_summary();
    return trainer.fit({.step =
                            [&](const Tensor& x, const Tensor& y, train::RunningSums& sums) {
                              return train::lm_step(task.clip(), *net, params, *opt, dev, job, x, y, sums);
                            },
                        .end_epoch =
                            [&](const train::EpochEnd& e) {
                              const train::EvalResult ev = train::evaluate_lm(*net, test_set, dev, 64, &job);
                              if (job.chatty()) train::lm_summary(c, e, ev, trainer.log());
                              std::fflush(stdout);
                              if (schedule) schedule->step();
                            }},
                       [&] {
                         if (cf.checkpoint_dir.empty()) return;
                         job.gather_model();
                         if (job.chatty())
                           save(*net, (std::filesystem::path(cf.checkpoint_dir) / (s.name() + ".ckpt")).string(), meta);
                       });
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
  } catch (const Error& e) {
    return train::report_failure("ember train", e);
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    switch (file.spec.task_case()) {
      case train_file::TrainFile::kGan:
        return train_gan(file, rest);
      case train_file::TrainFile::kLanguageModel:
        return train_language_model(file, rest);
      default:
        return train_classifier(file, rest);
    }
  } catch (const Error& e) {  // a GAN file whose networks do not fit the task
    return train::report_failure("ember train", e);
  }
}

}  // namespace ember::tools
