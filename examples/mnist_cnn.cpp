// Trains the MNIST CNN (models/mnist_cnn.h) on MNIST, or on Fashion-MNIST when MNIST is not
// there, with a progress bar, a CSV metrics log, evaluation after every epoch and checkpoints
// that resume exactly. SIGTERM/SIGINT write a checkpoint and exit with status 75 ("preempted"),
// which is how the scheduler stops and later resumes a job.
//
// With --data-parallel it is one rank of a data-parallel job started by `mpirun -np N` or
// `ember launch -n N`: every rank takes its share of each global batch, gradients are averaged
// across ranks while backward runs (dist/data_parallel.h), and rank 0 prints and
// writes the model. With --pipeline K the model is cut into K stages instead, N/K replicas of the
// pipeline splitting each batch (dist/pipeline.h). The loop itself (epochs, progress, checkpoints,
// signals) is train/trainer.h (ember::train); this file says what is trained, on what, and what one step does.
#include "models/mnist_cnn.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/checkpoint.h"
#include "train/class_record.h"
#include "train/classifier.h"
#include "train/flags.h"
#include "train/parallel_job.h"
#include "train/trainer.h"
#include "train/training.h"

using namespace ember;

int main(int argc, char** argv) {
  train::Flags flags(argc, argv,
                     "Trains the MNIST CNN (3 conv + 2 linear layers) with Adam; without --data it falls back\n"
                     "to Fashion-MNIST when data/mnist holds no MNIST files. Example: mnist_cnn --epochs 5");
  train::CommonFlags cf(flags, /*epochs=*/5, /*batch=*/64, /*lr=*/1e-3, "mnist_cnn",
                        {.lr = "Adam learning rate",
                         .seed = "seed for weights, shuffling and everything random",
                         .checkpoint_dir = "",
                         .checkpoint_dir_help = "write a checkpoint and metrics.csv here (empty: none)"});
  train::ParallelJob job("mnist_cnn", train::ParallelFlags(flags));
  flags.finish();
  cf.check(flags);
  try {
    const Device dev = job.start(cf.dev());  // data-parallel: this rank's device
    cf.prepare();                            // after the data: bad data leave no empty folder behind
    data::MnistOptions mopts{.normalize = train::kMnistNormalize, .transform = nullptr, .limit = cf.limit};
    data::MNIST train_set(cf.data_root, data::Split::Train, mopts), test_set(cf.data_root, data::Split::Test, mopts);

    manual_seed(static_cast<uint64_t>(cf.seed));
    models::MnistCnn net;
    nn::fuse(net);  // each conv, ReLU, max-pool as conv2d_max_pool2d then ReLU (layers/fusion.h)
    net.to(dev);
    job.wrap(net, cf.batch_size, static_cast<uint64_t>(cf.seed), {1, 28, 28});  // no-op in one process
    optim::Adam opt(job.parameters(net), {.lr = cf.lr});                        // a pipeline stage: its layers'
    data::DataLoader loader(train_set, job.loader_options({.batch_size = cf.batch_size,
                                                           .shuffle = true,
                                                           .workers = static_cast<int>(cf.workers),
                                                           .seed = static_cast<uint64_t>(cf.seed)}));
    // What a resume must share with its checkpoint (train::check_resume_settings).
    std::map<std::string, std::string> meta = cf.settings();
    meta.insert({{"model", "MnistCnn"}, {"data", cf.data_name}});
    meta.merge(train::class_record(train::mnist_class_names(cf.data_name), train::kMnistNormalize));
    train::TrainerOptions topts = train::trainer_options(cf, train::classifier_columns());
    topts.say_checkpoint_written = true;
    train::Trainer trainer(topts, {&net, {&opt}, {{"default", &default_generator()}}}, loader, meta, &job);
    trainer.resume();
    std::printf("Training MnistCnn on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g\n",
                cf.data_name.c_str(), (long long)train_set.size(), train::device_label(dev).c_str(), cf.epochs,
                cf.batch_size, cf.lr);
    if (job.chatty()) std::printf("%s", net.summary({1, 1, 28, 28}).c_str());
    job.print_summary();

    // One step: forward (through the data-parallel wrapper in a job), cross-entropy, backward,
    // Adam; the epoch's running loss and accuracy.
    auto step = [&](const Tensor& x, const Tensor& y, train::RunningSums& sums) {
      return train::classifier_step(net, opt, dev, &job, x, y, sums);
    };
    auto end_epoch = [&](const train::EpochEnd& e) {
      auto [acc, loss] = train::evaluate_classifier(net, test_set, dev, 256, &job);
      train::classifier_summary(e, acc, loss, trainer.log());
    };
    auto write_model = [&] {
      if (cf.checkpoint_dir.empty()) return;
      job.gather_model();  // a pipeline's stages into rank 0's model
      if (!job.chatty()) return;
      const std::string file = (std::filesystem::path(cf.checkpoint_dir) / "mnist_cnn.ckpt").string();
      save(net, file, meta);  // with what `ember eval` and `ember predict` read
      std::printf("Model written to %s\n", file.c_str());
    };
    return trainer.fit({.step = step, .end_epoch = end_epoch}, write_model);
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    return job.fail(e);
  }
}
