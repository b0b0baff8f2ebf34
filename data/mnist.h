// MNIST and Fashion-MNIST: a directory holding the four standard IDX files
// (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte), each plain or with a .gz suffix. Examples are float32 [1, 28, 28]
// images scaled to [0, 1] (optionally normalised) and int64 labels.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "data/dataset.h"

namespace ember::data {

enum class Split { Train, Test };

struct MnistOptions {
  // (mean, std) applied after scaling to [0, 1]; MNIST's usual values are (0.1307, 0.3081).
  std::optional<std::pair<double, double>> normalize;
  Transform transform;  // applied per example after scaling/normalising
  int64_t limit = -1;   // use only the first `limit` examples (tests, quick runs)
};

class MNIST : public Dataset {
 public:
  MNIST(const std::string& root, Split split, MnistOptions opts = {});
  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index, Generator& gen) const override;
  Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const override;

  const Tensor& images() const { return images_; }  // uint8 [N, 28, 28]
  const Tensor& labels() const { return labels_; }  // int64 [N]

  // The path of one of the four files under root (with or without .gz), or "" if absent.
  static std::string find_file(const std::string& root, const std::string& stem);
  // True when root holds all four files.
  static bool available(const std::string& root);
  // uint8 pixels (any shape) as float32 in [0, 1], normalised as `normalize` says: the one formula
  // of every MNIST example, also applied to images read from files (`ember predict`) so that they
  // meet the network exactly as the test set did.
  static Tensor pixels_to_float(const Tensor& u8, const std::optional<std::pair<double, double>>& normalize);

 private:
  Tensor to_float(const Tensor& u8) const;
  Tensor images_, labels_;
  MnistOptions opts_;
};

using FashionMNIST = MNIST;  // same files, same format

}  // namespace ember::data
