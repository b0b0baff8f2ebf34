// The networks that model files and checkpoints hold, rebuilt with their weights loaded: a model of
// the zoo by name (its sizes read off the checkpoint's tensors), or a network of a model file
// (`ember train`'s). `ember export onnx`, `ember eval` and `ember predict` rebuild them so.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/checkpoint.h"
#include "layers/module.h"

namespace ember::tools {

// The zoo's names, for messages and --help.
extern const char* const kZooModels;

// The checkpoint a command works on, read at most once, when a step first needs it: every step
// (its metadata, the network's sizes, the weights) shares the one read, and mistakes in the flags
// and the model file, checked before, still come first.
class SavedCheckpoint {
 public:
  explicit SavedCheckpoint(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  const CheckpointContents& contents() {
    if (!contents_) contents_ = read_checkpoint(path_);
    return *contents_;
  }

 private:
  std::string path_;
  std::optional<CheckpointContents> contents_;
};

// The zoo model `name`, sized from the checkpoint's tensors, with the checkpoint loaded into it;
// and an example input of `batch` rows (and `seq` steps for the token models). An unknown name is
// a UsageError; weights that do not fit are an ember::Error naming the file and every mismatch.
std::shared_ptr<nn::Module> zoo_model(const std::string& name, SavedCheckpoint& ckpt, int64_t batch, int64_t seq,
                                      std::vector<Tensor>& example);

// Network `network` of a model file (default: the one its task trains, a GAN's generator), sized
// by the checkpoint's tensors where the vocabulary sizes it, with the checkpoint loaded into it;
// and an example input of `batch` rows.
std::shared_ptr<nn::Module> model_file_network(const std::string& model_file, const std::string& network,
                                               SavedCheckpoint& ckpt, int64_t batch, std::vector<Tensor>& example);

}  // namespace ember::tools
