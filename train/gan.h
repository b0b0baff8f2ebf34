// The training loop both GAN examples share (mnist_gan: MLP, mnist_dcgan: convolutional): the
// standard non-saturating GAN objective with Adam, images scaled to [-1, 1], a progress bar, a
// CSV of D and G losses every --log-every steps, an end-of-epoch summary (the discriminator's
// mean score on held-out real images and on samples), a PNG grid of samples from a fixed noise
// batch after every epoch, and checkpoints that resume exactly.
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "data/image.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "train/trainer.h"
#include "train/training.h"

namespace ember::train {

// Generator and discriminator in one module, so that one checkpoint holds both.
template <class G, class D>
struct GanPair : nn::Module {
  G gen;
  D disc;
  // `gen_args` go to G's constructor (e.g. models::DcganGeneratorOptions).
  template <class... A>
  explicit GanPair(A&&... gen_args) : gen(std::forward<A>(gen_args)...) {
    register_modules({{"generator", &gen}, {"discriminator", &disc}});
  }
  std::string type_name() const override { return gen.type_name() + "+" + disc.type_name(); }
};

// The flags of the GAN loop itself: the log interval and the sample grids' folder.
struct GanLoopFlags {
  long long log_every = 50;
  std::string samples_dir;
  GanLoopFlags() = default;
  explicit GanLoopFlags(Flags& flags);
};

// The flags of the GAN examples: the common ones, then beta1, the DCGAN generator's batch norm,
// and the loop's. The defaults of --lr and --beta1 are per example (each chose what trains its
// model).
template <class G>
struct GanFlags {
  CommonFlags cf;
  double beta1;
  // Only the DCGAN generator has the option; false gives the exact recipe (which collapses).
  bool batch_norm = true;
  GanLoopFlags loop;

  GanFlags(Flags& flags, const std::string& name, long long epochs, double lr, double beta1_def)
      : cf(flags, epochs, 64, lr, name, {.accumulate = false}) {
    beta1 = flags.real("beta1", beta1_def, "Adam beta1 for both networks");
    if constexpr (std::is_constructible_v<G, models::DcganGeneratorOptions>)
      batch_norm = flags.boolean("batch-norm", true,
                                 "batch normalisation in the generator (false: the issue's recipe, which collapses)");
    loop = GanLoopFlags(flags);
  }
};

// The standard GAN objective on D's outputs: logits (BCE with logits) or probabilities (BCE).
struct GanObjective {
  bool logits;
  Tensor loss(const Tensor& out, double target) const;
  // D's mean score (a probability).
  double prob(const Tensor& out) const;
};

// The means over the steps since the last metrics row (empty at every checkpoint: a resumed run
// writes its rows from there).
struct GanLogWindow {
  double d = 0, g = 0, real = 0, fake = 0;
  int64_t steps = 0;
  void flush(MetricsLog& log, int64_t epoch, int64_t step, double seconds);
};

// The two networks of a GAN, their optimizers, and what the loop needs to know of them.
struct GanParts {
  nn::Module& pair;  // both networks: what checkpoints hold
  nn::Module& gen;
  nn::Module& disc;
  optim::Optimizer& opt_g;
  optim::Optimizer& opt_d;
  int64_t noise_dim = models::kNoiseDim;
  std::pair<double, double> normalize = {0.5, 0.5};  // pixels to [-1, 1], the generator's tanh
  std::string optimizers;                            // for the start-up line ("Adam lr 0.0002 beta1 0.5")
  std::map<std::string, std::string> meta = {};      // checkpoint metadata beyond the common flags'
};

// One step of each network on a batch of real images; adds to the epoch's sums and the window.
StepReport gan_step(GanParts& p, const GanObjective& obj, const Tensor& real, RunningSums& sums, GanLogWindow& window);

// The end of an epoch: D's mean score on held-out real images and on the fixed-noise samples,
// whose grid goes to `samples_dir` (the returned path; empty without a folder) and, as an image,
// to TensorBoard's "samples" when `tensorboard` is not null.
std::tuple<double, double, std::string> gan_epoch_scores(GanParts& gan, const data::Dataset& test_set,
                                                         const Tensor& fixed_noise, const GanObjective& obj,
                                                         const std::string& samples_dir, int64_t epoch,
                                                         SummaryWriter* tensorboard, int64_t step);

// The whole run of any two networks, once the flags are read, the data found and the networks and
// their optimizers made (after manual_seed(--seed)).
int run_gan_loop(const CommonFlags& cf, const GanLoopFlags& lf, const std::string& name, bool logits, GanParts& gan);

// The examples' run: their models, Adam with one rate and beta1 for both networks.
template <class G, class D>
int run_gan(GanFlags<G>& f, const std::string& name, bool logits) {
  const CommonFlags& cf = f.cf;
  manual_seed(static_cast<uint64_t>(cf.seed));
  std::unique_ptr<GanPair<G, D>> gan_ptr;
  if constexpr (std::is_constructible_v<G, models::DcganGeneratorOptions>)
    gan_ptr = std::make_unique<GanPair<G, D>>(models::DcganGeneratorOptions{.batch_norm = f.batch_norm});
  else
    gan_ptr = std::make_unique<GanPair<G, D>>();
  GanPair<G, D>& gan = *gan_ptr;
  gan.to(cf.dev());
  optim::Adam opt_g(gan.gen.parameters(), {.lr = cf.lr, .beta1 = f.beta1});
  optim::Adam opt_d(gan.disc.parameters(), {.lr = cf.lr, .beta1 = f.beta1});
  char optimizers[96];
  std::snprintf(optimizers, sizeof optimizers, "Adam lr %g beta1 %g", cf.lr, f.beta1);
  GanParts parts{.pair = gan,
                 .gen = gan.gen,
                 .disc = gan.disc,
                 .opt_g = opt_g,
                 .opt_d = opt_d,
                 .optimizers = optimizers,
                 .meta = {{"generator", gan.gen.extra_repr()}, {"flag.beta1", exact_number(f.beta1)}}};
  return run_gan_loop(cf, f.loop, name, logits, parts);
}

// The program: `logits`: D outputs logits (BCE with logits) rather than probabilities (BCE).
template <class G, class D>
int train_gan(int argc, char** argv, const std::string& name, const std::string& description, bool logits,
              long long default_epochs, double default_lr = 2e-4, double default_beta1 = 0.5) {
  Flags flags(argc, argv, description);
  GanFlags<G> f(flags, name, default_epochs, default_lr, default_beta1);
  flags.finish();
  f.cf.check(flags);
  try {
    // The data first, then the output folders: bad data leave no empty folder behind.
    f.cf.prepare();
    if (f.loop.samples_dir.empty())
      f.loop.samples_dir = f.cf.checkpoint_dir;
    else
      prepare_output_dir("samples-dir", f.loop.samples_dir, /*fresh=*/false, /*overwrite=*/false);
    return run_gan<G, D>(f, name, logits);
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    return report_failure(name, e);
  }
}

}  // namespace ember::train
