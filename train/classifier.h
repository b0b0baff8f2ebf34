// An image classifier's side of the training loop (trainer.h), shared by mnist_cnn, custom_model
// and `ember train`: the step (cross-entropy, the optimizer, the running loss and accuracy), the
// evaluation on the test set (data-parallel: each rank its shard, the sums added up), the epoch's
// summary line and log row, and train_mnist_classifier, the whole run for a model on MNIST
// (custom_model uses it so that its file is only the model and a few lines).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"
#include "data/dataset.h"
#include "layers/module.h"
#include "layers/optim/optimizer.h"
#include "train/parallel_job.h"
#include "train/trainer.h"
#include "train/training.h"

namespace ember::train {

// The metrics log's columns of a classifier.
std::vector<std::string> classifier_columns();

// Accuracy and mean cross-entropy of a classifier over a data set; with a data-parallel `job`,
// each rank evaluates its shard and the sums are added up across ranks.
std::pair<double, double> evaluate_classifier(nn::Module& net, const data::Dataset& ds, Device dev, int64_t batch = 256,
                                              ParallelJob* job = nullptr);

// One step of a classifier on (x, y): forward (through the data-parallel wrapper in a job),
// cross-entropy (with `criterion`'s class weights and label smoothing), backward, the optimizer's step;
// the running sums are loss_sum, correct, seen.
StepReport classifier_step(nn::Module& net, optim::Optimizer& opt, Device dev, ParallelJob* job, const Tensor& x,
                           const Tensor& y, RunningSums& sums, const CrossEntropyOptions& criterion = {});

// The epoch's summary line (flushed: with stdout a file, as under `sched logs`, it would
// otherwise wait for the next progress line, or be lost to a SIGKILL) and its log row.
void classifier_summary(const EpochEnd& e, double test_acc, double test_loss, MetricsLog& log);

// Trains a classifier on MNIST (or Fashion-MNIST) with Adam and the common flags: progress bar,
// metrics log, evaluation after every epoch, checkpoints, resume, --max-steps, and exit status
// kPreemptedExit after a checkpoint on SIGINT/SIGTERM. Call cf.prepare() first. Returns the
// process exit status.
int train_mnist_classifier(nn::Module& net, const std::string& model_name, CommonFlags& cf);

}  // namespace ember::train
