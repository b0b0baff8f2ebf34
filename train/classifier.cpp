#include "train/classifier.h"

#include <cstdio>
#include <map>

#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/nn.h"
#include "train/accumulate.h"
#include "train/class_record.h"
#include "train/cuda_graph_step.h"
#include "train/precision.h"
#ifdef EMBER_HAVE_DIST
#include "dist/pipeline.h"
#endif

namespace ember::train {

// The metrics log's columns of a classifier.
std::vector<std::string> classifier_columns() {
  return {"epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "seconds"};
}

// Accuracy and mean cross-entropy of a classifier over a data set; with a data-parallel `job`,
// each rank evaluates its shard and the sums are added up across ranks.
std::pair<double, double> evaluate_classifier(nn::Module& net, const data::Dataset& ds, Device dev, int64_t batch,
                                              ParallelJob* job) {
  NoGradGuard ng;
  net.eval();
  const int world = job ? job->shards() : 1;
  data::DataLoader loader(
      ds, {.batch_size = batch * world, .shuffle = false, .rank = job ? job->shard() : 0, .world_size = world});
  double correct = 0, total = 0, loss_sum = 0;
  for (auto& [x, y] : loader) {
    Tensor logits;
#ifdef EMBER_HAVE_DIST
    if (job && job->pipeline()) {  // the logits exist on the last stage only; the others add zeros
      logits = job->pipeline()->forward(x.to(dev));
      if (!logits.defined()) continue;
    }
#endif
    if (!logits.defined()) logits = net(x.to(dev));
    Tensor yd = y.to(dev);
    loss_sum += cross_entropy(logits, yd, {.reduction = Reduction::Sum}).item();
    correct += static_cast<double>(sum(eq(argmax(logits, 1), yd)).item<int64_t>());
    total += static_cast<double>(y.numel());
  }
  if (job && job->active()) {
    const std::vector<double> s = job->sum({loss_sum, correct, total});
    loss_sum = s[0], correct = s[1], total = s[2];
  }
  net.train();
  return {total ? correct / total : 0.0, total ? loss_sum / total : 0.0};
}

StepReport classifier_step(nn::Module& net, optim::Optimizer& opt, Device dev, ParallelJob* job, const Tensor& x,
                           const Tensor& y, RunningSums& sums, const CrossEntropyOptions& criterion) {
  const double n = static_cast<double>(y.numel());
  if (cuda_graph_requested()) {
    check_cuda_graph(dev, job && job->active());
    if (graphed_classifier_step(net, opt, dev, x, y, sums, criterion))
      return {y.numel(), {{"loss", sums["loss_sum"] / sums["seen"]}, {"acc", sums["correct"] / sums["seen"]}}};
  }
#ifdef EMBER_HAVE_DIST
  if (job && job->pipeline()) {  // the loss and the correct count come from the last stage
    opt.zero_grad();
    const double loss = job->pipeline()->train_step(
        x.to(dev), y.to(dev),
        [&criterion](const Tensor& logits, const Tensor& t) { return cross_entropy(logits, t, criterion); },
        [](const Tensor& logits, const Tensor& t) {
          return std::vector<double>{static_cast<double>(sum(eq(argmax(logits, 1), t)).item<int64_t>())};
        });
    run_precision().step(opt);  // fp16: skipped on every stage together (PipelineOptions::scaler)
    run_precision().update();
    sums["loss_sum"] += loss * n;
    sums["correct"] += job->pipeline()->last_step().metrics.at(0);
    sums["seen"] += n;
    return {y.numel(), {{"loss", sums["loss_sum"] / sums["seen"]}, {"acc", sums["correct"] / sums["seen"]}}};
  }
#endif
  opt.zero_grad();
  const StepPasses r = forward_backward(
      net, job, dev, x, y, criterion,
      [](const Tensor& logits, const Tensor& t, const CrossEntropyOptions& o) { return cross_entropy(logits, t, o); },
      [](const Tensor& logits, const Tensor& t) { return sum(eq(argmax(logits, 1), t)); });
  run_precision().step(opt);
  run_precision().update();
  sums["loss_sum"] += r.loss * n;
  sums["correct"] += r.correct;
  sums["seen"] += n;
  return {y.numel(), {{"loss", sums["loss_sum"] / sums["seen"]}, {"acc", sums["correct"] / sums["seen"]}}};
}

void classifier_summary(const EpochEnd& e, double test_acc, double test_loss, MetricsLog& log) {
  const double seen = e.sums.count("seen") ? e.sums.at("seen") : 0.0;
  const double tl = seen ? e.sums.at("loss_sum") / seen : 0.0, ta = seen ? e.sums.at("correct") / seen : 0.0;
  std::printf("%s: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s\n", e.title.c_str(), tl, ta, test_loss,
              test_acc, e.seconds());
  std::fflush(stdout);
  log.row({{"epoch", double(e.epoch + 1)},
           {"step", double(e.step)},
           {"train_loss", tl},
           {"train_acc", ta},
           {"test_loss", test_loss},
           {"test_acc", test_acc},
           {"seconds", e.seconds()}});
}

int train_mnist_classifier(nn::Module& net, const std::string& model_name, CommonFlags& cf) {
  data::MnistOptions mopts{.normalize = kMnistNormalize, .transform = nullptr, .limit = cf.limit};
  data::MNIST train_set(cf.data_root, data::Split::Train, mopts), test_set(cf.data_root, data::Split::Test, mopts);
  const Device dev = cf.dev();
  net.to(dev);
  optim::Adam opt(net.parameters(), {.lr = cf.lr});
  data::DataLoader loader(train_set, {.batch_size = cf.batch_size,
                                      .workers = static_cast<int>(cf.workers),
                                      .seed = static_cast<uint64_t>(cf.seed),
                                      .pin_memory = dev.is_cuda()});
  std::map<std::string, std::string> meta = cf.settings();
  meta.insert({{"model", model_name}, {"data", cf.data_name}});
  meta.merge(class_record(mnist_class_names(cf.data_name), kMnistNormalize));
  Trainer trainer(trainer_options(cf, classifier_columns()), {&net, {&opt}, {{"default", &default_generator()}}},
                  loader, meta);
  trainer.resume();
  std::printf("Training %s (%lld parameters) on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g\n",
              model_name.c_str(), (long long)net.num_parameters(), cf.data_name.c_str(), (long long)train_set.size(),
              device_label(dev).c_str(), cf.epochs, cf.batch_size, cf.lr);
  std::printf("%s", net.summary({1, 1, 28, 28}).c_str());
  return trainer.fit({.step = [&](const Tensor& x, const Tensor& y,
                                  RunningSums& sums) { return classifier_step(net, opt, dev, nullptr, x, y, sums); },
                      .end_epoch =
                          [&](const EpochEnd& e) {
                            auto [acc, loss] = evaluate_classifier(net, test_set, dev);
                            classifier_summary(e, acc, loss, trainer.log());
                          }});
}

}  // namespace ember::train
