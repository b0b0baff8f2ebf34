// The networks that model files and checkpoints hold, rebuilt with their weights loaded: a model of
// the zoo by name (its sizes read off the checkpoint's tensors), or a network of a model file
// (`ember train`'s). `ember export onnx`, `ember eval` and `ember predict` rebuild them so.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/checkpoint.h"
#include "layers/module.h"

namespace ember::tools {

// The zoo's names, for messages and --help.
extern const char* const kZooModels;

// The zoo model `name`, sized from the checkpoint's tensors, with `file` loaded into it; and an
// example input of `batch` rows (and `seq` steps for the token models). An unknown name is a
// UsageError; weights that do not fit are an ember::Error naming `file` and every mismatch.
std::shared_ptr<nn::Module> zoo_model(const std::string& name, const std::string& file, int64_t batch, int64_t seq,
                                      std::vector<Tensor>& example);

// Network `network` of a model file (default: the one its task trains, a GAN's generator), sized
// by the checkpoint's tensors where the vocabulary sizes it, with `file` loaded into it; and an
// example input of `batch` rows.
std::shared_ptr<nn::Module> model_file_network(const std::string& model_file, const std::string& network,
                                               const std::string& file, int64_t batch, std::vector<Tensor>& example);

}  // namespace ember::tools
