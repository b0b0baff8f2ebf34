// A classifier's checkpoint opened for `ember eval` and `ember predict`: the network with its
// weights, how an input is read (exactly as its training read its data: MNIST's pixel formula, or
// the model file's image size, channels and normalisation, or CSV features), and its class names.
//
// Which network: --model-file F, or --model NAME (the zoo's image classifiers), or else what the
// checkpoint records: the model file `ember train FILE` recorded ("model_file"), or the example's
// model ("model": MnistCnn, LeNet5). Checkpoints record their class names and input normalisation
// from this version on (train/class_record.h); for an older one the model file or the
// example's data name stand in, and `notes` says what was missing.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "interop/model_file.h"
#include "layers/module.h"
#include "tools/saved_model.h"

namespace ember::tools {

enum class InputKind { Mnist, Images, Csv };

struct SavedClassifier {
  std::string checkpoint;
  std::shared_ptr<nn::Module> net;  // on the CPU, in eval mode
  std::string what;                 // "MnistCnn (mnist_cnn)", "network 'net' of FILE"
  std::map<std::string, std::string> meta;
  std::optional<model_file::LoadedFile> file;  // when a model file defines the network
  InputKind kind = InputKind::Mnist;
  Shape input_shape;  // one example's
  int channels = 1;
  int64_t height = 28, width = 28;
  std::optional<std::pair<double, double>> normalize;  // (mean, std) of pixels in [0, 1]
  std::string csv_label_column;                        // the model file's (empty: the last column)
  std::vector<std::string> classes;                    // one per output, in output order
  std::vector<std::string> notes;                      // what an older checkpoint lacked

  // One image file read as the training read its images: float32 input_shape.
  Tensor read_image(const std::string& path) const;
  // The model's output index of a class named `name` (or numbered so); -1 if none.
  int64_t class_index(const std::string& name) const;
};

// --model and --model-file (at most one).
struct ModelChoice {
  std::string model, model_file;
};
SavedClassifier open_classifier(SavedCheckpoint& ckpt, const ModelChoice& choice);

// The labelled examples `ember eval` scores: `data` (an MNIST folder, an image folder of class
// subfolders or a CSV file, whichever the model reads; "": the data the checkpoint was trained
// on, as it records them), its first `limit` examples (-1: all).
struct TestSet {
  std::unique_ptr<data::Dataset> set;
  std::string name;  // "the Fashion-MNIST test set (/usr/share/...)"
};
TestSet open_test_set(const SavedClassifier& m, const std::string& data, int64_t limit);

// The image files `inputs` name: files as given, folders by every image below them (sorted).
std::vector<std::string> image_files(const std::vector<std::string>& inputs);

}  // namespace ember::tools
