// Model and solver files: a network (or two, for a GAN), its data, its optimizer and its training
// settings in Protobuf's text format (schema proto/train_file.proto, version 1), as Caffe's
// prototxt and solver files, so that a model is defined and trained without writing C++
// (`ember train FILE`). Every mistake in a file — a syntax error, an unknown layer or field, a
// value of the wrong type, a missing field, an input that names no earlier layer, shapes that do not
// connect — is an ember::Error that starts "FILE:LINE:" and names the network, the layer and the
// field.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "layers/optim/lr_scheduler.h"
#include "layers/optim/optimizer.h"
#include "train_file.pb.h"

namespace google::protobuf {
class TextFormat;
}

namespace ember::model_file {

inline constexpr int kVersion = 1;

// A parsed and checked file, and where each of its fields stands (for the messages).
struct LoadedFile {
  std::string path;
  train_file::TrainFile spec;
  struct Where;
  std::shared_ptr<Where> where;
  // "PATH:LINE" of network n (layer l of it when l >= 0; that layer's field `field` when given).
  std::string at(int network, int layer = -1, const std::string& field = {}) const;
  // "PATH:LINE" of a top-level field ("classifier", "training").
  std::string at_top(const std::string& field) const;
  // "PATH:LINE" of a field under top-level ones, dotted ("training.epochs", "gan.generator_solver.adam.lr");
  // the line of the deepest of them the file writes.
  std::string at_path(const std::string& dotted) const;
  // A path the file names, taken from the file's folder unless it is absolute.
  std::string resolve(const std::string& named) const;
};

// Reads and parses `path`, and checks the version and what can be checked without building: every
// number the file gives for the data (data.workers and data.augment included), the task (a
// classifier's loss too), its solvers and the training settings (a field it leaves out takes the
// default proto/train_file.proto names; one it gives out of range is refused as invalid, naming its
// line and the valid range).
LoadedFile load(const std::string& path);

// The index of the network named `name` ("" when the file has one network).
int network_index(const LoadedFile& file, const std::string& name, const std::string& who);

// Zeros of network n's input for `batch` examples: token ids (int64) when its first layer is an
// embedding, float32 otherwise.
Tensor example_input(const train_file::Network& n, int64_t batch);

// Makes network n's layers in file order (so a seed draws the weights the same layers made in the
// same order in C++ draw), running each on a zero example to learn its input's shape and to check
// that it connects. A chain is an nn::Sequential named by the network; anything else a GraphNet.
// `vocabulary`: the text source's vocabulary size, for embeddings and heads sized by it (0: none).
std::shared_ptr<nn::Module> build_network(const LoadedFile& file, int network, int64_t vocabulary = 0);

// The number of classes network n, a classifier's, scores: its output for a batch of 1 must be
// [1, C] (the logits cross_entropy takes), else an ember::Error naming the network's line.
int64_t classifier_outputs(const LoadedFile& file, int network, nn::Module& net);

// The optimizer of `solver` over `params`; `lr` > 0 replaces the file's learning rate.
std::unique_ptr<optim::Optimizer> make_optimizer(const LoadedFile& file, const train_file::Solver& solver,
                                                 const std::string& where, std::vector<Tensor> params, double lr);
// The solver's LR schedule over `opt`, or null.
std::unique_ptr<optim::LRScheduler> make_schedule(const train_file::Solver& solver, optim::Optimizer& opt);

}  // namespace ember::model_file
