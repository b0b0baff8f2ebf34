// The training loop both GAN examples share (mnist_gan: MLP, mnist_dcgan: convolutional): the
// standard non-saturating GAN objective with Adam, images scaled to [-1, 1], a progress bar, a
// CSV of D and G losses every --log-every steps, an end-of-epoch summary (the discriminator's
// mean score on held-out real images and on samples), a PNG grid of samples from a fixed noise
// batch after every epoch, and checkpoints that resume exactly.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>
#include <utility>

#include "common/training.h"
#include "data/image.h"
#include "models/gan.h"

namespace ember::examples {

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

// `logits`: D outputs logits (BCE with logits) rather than probabilities (BCE). The defaults of
// --lr and --beta1 are per example (each chose what trains its model).
template <class G, class D>
int train_gan(int argc, char** argv, const std::string& name, const std::string& description, bool logits,
              long long default_epochs, double default_lr = 2e-4, double default_beta1 = 0.5) {
  Flags flags(argc, argv, description);
  CommonFlags cf(flags, default_epochs, 64, default_lr, name);
  double beta1 = flags.real("beta1", default_beta1, "Adam beta1 for both networks");
  // Only the DCGAN generator has the option; false gives the exact recipe (which collapses).
  bool batch_norm = true;
  if constexpr (std::is_constructible_v<G, models::DcganGeneratorOptions>)
    batch_norm = flags.boolean("batch-norm", true,
                               "batch normalisation in the generator (false: the issue's recipe, which collapses)");
  long long log_every = flags.integer_min("log-every", 50, 1, "write a metrics row every N steps");
  std::string samples_dir = flags.str("samples-dir", "", "where the per-epoch sample grids go (empty: checkpoint-dir)");
  flags.finish();
  cf.check(flags);
  try {
    // The data first, then the output folders: bad data leave no empty folder behind.
    cf.prepare(flags);
    if (samples_dir.empty())
      samples_dir = cf.checkpoint_dir;
    else
      prepare_output_dir(flags, "samples-dir", samples_dir, /*fresh=*/false, /*overwrite=*/false);
    const std::string& data_name = cf.data_name;
    // Pixels to [-1, 1] to match the generator's tanh.
    data::MnistOptions mopts{.normalize = std::make_pair(0.5, 0.5), .transform = nullptr, .limit = cf.limit};
    data::MNIST train_set(cf.data_root, data::Split::Train, mopts), test_set(cf.data_root, data::Split::Test, mopts);
    const Device dev = cf.dev();
    manual_seed(static_cast<uint64_t>(cf.seed));
    auto make_gan = [&] {
      if constexpr (std::is_constructible_v<G, models::DcganGeneratorOptions>)
        return std::make_unique<GanPair<G, D>>(models::DcganGeneratorOptions{.batch_norm = batch_norm});
      else
        return std::make_unique<GanPair<G, D>>();
    };
    auto gan_ptr = make_gan();
    GanPair<G, D>& gan = *gan_ptr;
    gan.to(dev);
    optim::Adam opt_g(gan.gen.parameters(), {.lr = cf.lr, .beta1 = beta1});
    optim::Adam opt_d(gan.disc.parameters(), {.lr = cf.lr, .beta1 = beta1});
    data::DataLoader loader(train_set, {.batch_size = cf.batch_size,
                                        .drop_last = true,  // equal-sized real and fake batches
                                        .workers = static_cast<int>(cf.workers),
                                        .seed = static_cast<uint64_t>(cf.seed),
                                        .pin_memory = dev.is_cuda()});
    EMBER_CHECK(loader.batches_per_epoch() > 0, name, ": --batch-size ", cf.batch_size, " is larger than the ",
                train_set.size(), " training examples");
    std::map<std::string, std::string> meta = cf.settings();
    meta.insert({{"model", gan.type_name()}, {"data", data_name}, {"generator", gan.gen.extra_repr()}});
    meta["flag.beta1"] = exact_number(beta1);
    Checkpointer ckpt(cf.checkpoint_dir, {&gan, {&opt_g, &opt_d}, {{"default", &default_generator()}}}, loader, meta);
    TrainingPosition pos = ckpt.resume(cf.resume);
    install_stop_handlers();
    // The fixed noise comes from its own generator, so every epoch's grid (and a resumed run's)
    // shows the same latent points.
    Generator fixed_gen(static_cast<uint64_t>(cf.seed) + 1000003);
    const Tensor fixed_noise = randn({64, models::kNoiseDim}, {}, &fixed_gen).to(dev);

    auto loss_fn = [logits](const Tensor& out, double target) {
      Tensor t = full(out.shape(), target, {out.dtype(), out.device()});
      return logits ? nn::binary_cross_entropy_with_logits(out, t) : nn::binary_cross_entropy(out, t);
    };
    auto prob = [logits](const Tensor& out) { return (logits ? sigmoid(out) : out).mean().item(); };

    std::printf("Training %s on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g beta1 %g\n",
                gan.type_name().c_str(), data_name.c_str(), (long long)train_set.size(), device_label(dev).c_str(),
                cf.epochs, cf.batch_size, cf.lr, beta1);
    if (reached_max_steps(pos.step, cf.max_steps)) return 0;
    MetricsLog log(cf.log, {"epoch", "step", "d_loss", "g_loss", "d_real", "d_fake", "seconds"},
                   rows_to_keep(ckpt.resumed(), pos, /*per_epoch=*/false, cf.log, cf.checkpoint_dir));
    for (; pos.epoch < cf.epochs; ++pos.epoch) {
      ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(cf.epochs),
                      loader.batches_per_epoch(), cf.epochs - pos.epoch - 1);
      double sd = 0, sg = 0, sr = 0, sf = 0;  // sums over the log window (empty at every checkpoint)
      // Sums over the epoch; a resumed epoch goes on from its checkpoint's.
      RunningSums r = ckpt.take_running();
      double ed = r["d_loss_sum"], eg = r["g_loss_sum"];
      int64_t window = 0, steps = static_cast<int64_t>(r["steps"]), seen = static_cast<int64_t>(r["seen"]);
      const int64_t seen_before = seen;
      auto sums = [&]() -> RunningSums {
        return {{"d_loss_sum", ed}, {"g_loss_sum", eg}, {"steps", double(steps)}, {"seen", double(seen)}};
      };
      bool stop_now = false;
      auto flush = [&] {
        if (window == 0) return;
        const double w = double(window);
        log.row({{"epoch", double(pos.epoch + 1)},
                 {"step", double(pos.step)},
                 {"d_loss", sd / w},
                 {"g_loss", sg / w},
                 {"d_real", sr / w},
                 {"d_fake", sf / w},
                 {"seconds", bar.elapsed()}});
        sd = sg = sr = sf = 0;
        window = 0;
      };
      for (auto& [x, y] : loader) {
        Tensor real = x.to(dev);
        const int64_t n = real.size(0);
        Tensor fake = gan.gen(randn({n, models::kNoiseDim}, {DType::Float32, dev}));
        // Discriminator: real -> 1, fake -> 0 (the fake batch detached: G is not updated here).
        Tensor d_real = gan.disc(real), d_fake = gan.disc(fake.detach());
        Tensor loss_d = loss_fn(d_real, 1.0) + loss_fn(d_fake, 0.0);
        opt_d.zero_grad();
        loss_d.backward();
        opt_d.step();
        // Generator: make D call the fakes real (the non-saturating loss of Goodfellow et al.).
        Tensor loss_g = loss_fn(gan.disc(fake), 1.0);
        opt_g.zero_grad();
        loss_g.backward();
        opt_g.step();
        ++pos.step;
        ++steps;
        ++window;
        seen += n;
        const double ld = loss_d.item(), lg = loss_g.item();
        sd += ld, sg += lg, ed += ld, eg += lg;
        sr += prob(d_real.detach()), sf += prob(d_fake.detach());
        bar.update(loader.position().batch, seen - seen_before,
                   {{"d_loss", ed / double(steps)}, {"g_loss", eg / double(steps)}});
        if (window >= log_every) flush();
        if (stop_requested()) {
          flush();
          return ckpt.preempted(pos, sums());
        }
        if (cf.max_steps >= 0 && pos.step >= cf.max_steps) {
          stop_now = true;
          break;
        }
      }
      flush();
      const int64_t done = loader.position().batch, batches = loader.batches_per_epoch();
      // End of epoch: D's mean score on held-out real images and on the fixed-noise samples.
      double test_real = 0;
      Tensor samples;
      {
        NoGradGuard ng;
        gan.eval();
        data::DataLoader tl(test_set, {.batch_size = 500, .shuffle = false});
        double total = 0;
        for (auto& [x, y] : tl) {
          test_real += prob(gan.disc(x.to(dev))) * double(x.size(0));
          total += double(x.size(0));
        }
        test_real /= total;
        samples = gan.gen(fixed_noise);
        gan.train();
      }
      double sample_score;
      {
        NoGradGuard ng;
        gan.eval();
        sample_score = prob(gan.disc(samples));
        gan.train();
      }
      std::string grid;
      if (!samples_dir.empty()) {
        std::filesystem::create_directories(samples_dir);
        char file[64];
        std::snprintf(file, sizeof file, "samples_epoch_%03lld.png", (long long)pos.epoch + 1);
        grid = (std::filesystem::path(samples_dir) / file).string();
        data::save_image_grid(samples, grid, 8, -1.0, 1.0);
      }
      std::printf("%s: d_loss %.4f g_loss %.4f | D(test images) %.3f D(samples) %.3f | %.1f s%s%s\n",
                  epoch_title(pos.epoch, done > 0 && done < batches, done, batches).c_str(),
                  steps ? ed / double(steps) : 0.0, steps ? eg / double(steps) : 0.0, test_real, sample_score,
                  bar.elapsed(), grid.empty() ? "" : " | samples: ", grid.c_str());
      std::fflush(stdout);
      ckpt.save(pos, sums());
      if (stop_now) break;
    }
    if (!cf.checkpoint_dir.empty())
      save(gan.gen, (std::filesystem::path(cf.checkpoint_dir) / (name + "_generator.ckpt")).string());
    return 0;
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace ember::examples
