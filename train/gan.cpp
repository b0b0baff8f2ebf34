#include "train/gan.h"

#include <cstdio>
#include <filesystem>

#include "data/dataloader.h"
#include "data/image.h"
#include "data/mnist.h"
#include "train/cuda_graph_step.h"
#include "train/precision.h"

namespace ember::train {

GanLoopFlags::GanLoopFlags(Flags& flags) {
  log_every = flags.integer_min("log-every", 50, 1, "write a metrics row every N steps");
  samples_dir = flags.str("samples-dir", "", "where the per-epoch sample grids go (empty: checkpoint-dir)");
}

Tensor GanObjective::loss(const Tensor& out, double target) const {
  Tensor t = full(out.shape(), target, {out.dtype(), out.device()});
  return logits ? nn::binary_cross_entropy_with_logits(out, t) : nn::binary_cross_entropy(out, t);
}

double GanObjective::prob(const Tensor& out) const {
  // D's output leaves an autocast step in 16 bits (its last layer is a GEMM or a convolution), and
  // this report runs outside the scope, where sigmoid has no 16-bit kernel: widen it (exact).
  const bool half = out.dtype() == DType::Float16 || out.dtype() == DType::BFloat16;
  const Tensor o = half ? out.to(DType::Float32) : out;
  return (logits ? sigmoid(o) : o).mean().item();
}

void GanLogWindow::flush(MetricsLog& log, int64_t epoch, int64_t step, double seconds) {
  if (steps == 0) return;
  const double w = double(steps);
  log.row({{"epoch", double(epoch + 1)},
           {"step", double(step)},
           {"d_loss", d / w},
           {"g_loss", g / w},
           {"d_real", real / w},
           {"d_fake", fake / w},
           {"seconds", seconds}});
  *this = {};
}

StepReport gan_step(GanParts& p, const GanObjective& obj, const Tensor& real, RunningSums& sums, GanLogWindow& window) {
  nn::Module &gen = p.gen, &disc = p.disc;
  EMBER_CHECK(!cuda_graph_requested(),
              "--cuda-graph captures the classifiers' step only: a GAN step draws its noise "
              "on the device, which a replay would repeat");
  optim::Optimizer &opt_g = p.opt_g, &opt_d = p.opt_d;
  const int64_t n = real.size(0);
  Precision& prec = run_precision();  // --precision: each forward under autocast, one scaler
  std::optional<autocast> amp;
  prec.enter_autocast(amp, real.device());
  Tensor fake = gen(randn({n, p.noise_dim}, {DType::Float32, real.device()}));
  // Discriminator: real -> 1, fake -> 0 (the fake batch detached: G is not updated here).
  Tensor d_real = disc(real), d_fake = disc(fake.detach());
  Tensor loss_d = obj.loss(d_real, 1.0) + obj.loss(d_fake, 0.0);
  amp.reset();
  opt_d.zero_grad();
  prec.backward(loss_d);
  prec.step(opt_d);
  // Generator: make D call the fakes real (the non-saturating loss of Goodfellow et al.).
  prec.enter_autocast(amp, real.device());
  Tensor loss_g = obj.loss(disc(fake), 1.0);
  amp.reset();
  opt_g.zero_grad();
  prec.backward(loss_g);
  prec.step(opt_g);
  prec.update();
  const double ld = loss_d.item(), lg = loss_g.item();
  sums["d_loss_sum"] += ld, sums["g_loss_sum"] += lg, sums["steps"] += 1, sums["seen"] += double(n);
  window.d += ld, window.g += lg, ++window.steps;
  window.real += obj.prob(d_real.detach()), window.fake += obj.prob(d_fake.detach());
  const double steps = sums["steps"];
  return {n, {{"d_loss", sums["d_loss_sum"] / steps}, {"g_loss", sums["g_loss_sum"] / steps}}};
}

std::tuple<double, double, std::string> gan_epoch_scores(GanParts& gan, const data::Dataset& test_set,
                                                         const Tensor& fixed_noise, const GanObjective& obj,
                                                         const std::string& samples_dir, int64_t epoch,
                                                         SummaryWriter* tensorboard, int64_t step) {
  NoGradGuard ng;
  gan.pair.eval();
  data::DataLoader tl(test_set, {.batch_size = 500, .shuffle = false});
  double test_real = 0, total = 0;
  for (auto& [x, y] : tl) {
    test_real += obj.prob(gan.disc(x.to(fixed_noise.device()))) * double(x.size(0));
    total += double(x.size(0));
  }
  Tensor samples = gan.gen(fixed_noise);
  const double sample_score = obj.prob(gan.disc(samples));
  gan.pair.train();
  std::string grid;
  const Tensor image = data::make_grid(samples, 8, -1.0, 1.0);
  if (!samples_dir.empty()) {
    std::filesystem::create_directories(samples_dir);
    char file[64];
    std::snprintf(file, sizeof file, "samples_epoch_%03lld.png", (long long)epoch + 1);
    grid = (std::filesystem::path(samples_dir) / file).string();
    data::write_png(grid, image);
  }
  if (tensorboard) tensorboard->add_image("samples", image, step);
  return {test_real / total, sample_score, grid};
}

int run_gan_loop(const CommonFlags& cf, const GanLoopFlags& lf, const std::string& name, bool logits, GanParts& gan) {
  data::MnistOptions mopts{.normalize = gan.normalize, .transform = nullptr, .limit = cf.limit};
  data::MNIST train_set(cf.data_root, data::Split::Train, mopts), test_set(cf.data_root, data::Split::Test, mopts);
  const Device dev = cf.dev();
  data::DataLoader loader(train_set, {.batch_size = cf.batch_size,
                                      .drop_last = true,  // equal-sized real and fake batches
                                      .workers = static_cast<int>(cf.workers),
                                      .seed = static_cast<uint64_t>(cf.seed),
                                      .pin_memory = dev.is_cuda()});
  EMBER_CHECK(loader.batches_per_epoch() > 0, name, ": --batch-size ", cf.batch_size, " is larger than the ",
              train_set.size(), " training examples");
  std::map<std::string, std::string> meta = cf.settings();
  meta.insert({{"model", gan.pair.type_name()}, {"data", cf.data_name}});
  meta.insert(gan.meta.begin(), gan.meta.end());
  TrainerOptions topts = trainer_options(cf, {"epoch", "step", "d_loss", "g_loss", "d_real", "d_fake", "seconds"});
  topts.rows_per_epoch = false;
  Trainer trainer(topts, {&gan.pair, {&gan.opt_g, &gan.opt_d}, {{"default", &default_generator()}}}, loader, meta);
  trainer.resume();
  // The fixed noise comes from its own generator, so every epoch's grid (and a resumed run's)
  // shows the same latent points.
  Generator fixed_gen(static_cast<uint64_t>(cf.seed) + 1000003);
  const Tensor fixed_noise = randn({64, gan.noise_dim}, {}, &fixed_gen).to(dev);
  const GanObjective obj{logits};
  std::printf("Training %s on %s (%lld examples) on %s: %lld epochs, batch %lld, %s\n", gan.pair.type_name().c_str(),
              cf.data_name.c_str(), (long long)train_set.size(), device_label(dev).c_str(), cf.epochs, cf.batch_size,
              gan.optimizers.c_str());
  std::printf("Generator:\n%sDiscriminator:\n%s", gan.gen.summary({1, gan.noise_dim}).c_str(),
              gan.disc.summary({1, 1, 28, 28}).c_str());
  GanLogWindow window;
  auto flush = [&] {
    window.flush(trainer.log(), trainer.position().epoch, trainer.position().step, trainer.epoch_seconds());
  };
  auto step = [&](const Tensor& x, const Tensor&, RunningSums& sums) {
    StepReport r = gan_step(gan, obj, x.to(dev), sums, window);
    if (window.steps >= lf.log_every) flush();
    return r;
  };
  auto end_epoch = [&](const EpochEnd& e) {
    flush();
    auto [test_real, sample_score, grid] =
        gan_epoch_scores(gan, test_set, fixed_noise, obj, lf.samples_dir, e.epoch, trainer.tensorboard(), e.step);
    const double steps = e.sums.count("steps") ? e.sums.at("steps") : 0.0;
    std::printf("%s: d_loss %.4f g_loss %.4f | D(test images) %.3f D(samples) %.3f | %.1f s%s%s\n", e.title.c_str(),
                steps ? e.sums.at("d_loss_sum") / steps : 0.0, steps ? e.sums.at("g_loss_sum") / steps : 0.0, test_real,
                sample_score, e.seconds(), grid.empty() ? "" : " | samples: ", grid.c_str());
    std::fflush(stdout);
  };
  auto write_generator = [&] {
    if (!cf.checkpoint_dir.empty())
      save(gan.gen, (std::filesystem::path(cf.checkpoint_dir) / (name + "_generator.ckpt")).string());
  };
  return trainer.fit({.step = step, .end_epoch = end_epoch, .before_checkpoint = flush}, write_generator);
}

}  // namespace ember::train
