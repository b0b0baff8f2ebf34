// Writes data sets and model files for the `ember train` data-source test (train_file_data.sh): two
// Gaussian blobs as CSV files, bright and dark squares as an image folder, and a model file for
// each, with paths relative to the file. Usage: train_file_data DIR
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "core/ops.h"
#include "data/image.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

// Class k's points lie around (2k - 1) in every coordinate.
void blobs(const fs::path& p, int64_t n, Generator& g) {
  std::string csv = "x0,x1,x2,x3,label\n";
  const Tensor noise = randn({n, 4}, {}, &g);
  for (int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i % 2);
    for (int64_t j = 0; j < 4; ++j) csv += std::to_string(2.0 * k - 1 + noise[i][j].item()) + ",";
    csv += std::to_string(k) + "\n";
  }
  write_text(p, csv);
}

void squares(const fs::path& dir, int64_t n, Generator& g) {
  for (const auto& [name, level] : {std::pair<const char*, double>{"bright", 200}, {"dark", 60}}) {
    fs::create_directories(dir / name);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor img = (rand({8, 8}, {}, &g) * 40 + (level - 20)).to(DType::UInt8);
      data::write_png((dir / name / (std::to_string(i) + ".png")).string(), img);
    }
  }
}

const char* kCsvModel = R"(version: 1
name: "blobs"
network {
  name: "net"
  input_shape: [4]
  layer { name: "fc1" linear { out_features: 16 } }
  layer { name: "relu" relu {} }
  layer { name: "fc2" linear { out_features: 2 } weight_init { xavier_uniform {} } bias_init { constant: 0 } }
}
data { csv { train: "blobs_train.csv" test: "blobs_test.csv" label_column: "label" } batch_size: 16 }
classifier { solver { sgd { lr: 0.1 momentum: 0.9 } } }
training { epochs: 4 seed: 3 }
)";

const char* kImageModel = R"(version: 1
name: "squares"
network {
  name: "net"
  input_shape: [1, 8, 8]
  layer { name: "c1" conv2d { out_channels: 4 kernel: [3] padding: [1] } }
  layer { name: "relu" relu {} }
  layer { name: "gap" adaptive_avg_pool2d { output: [1] } }
  layer { name: "flatten" flatten {} }
  layer { name: "head" linear { out_features: 2 } }
}
data {
  image_folder { train: "images/train" test: "images/test" height: 8 width: 8 channels: 1 mean: 0.5 std: 0.25 }
  augment { crop_padding: 1 horizontal_flip: 0.5 }
  batch_size: 8
}
classifier { solver { adam { lr: 0.05 } } }
training { epochs: 4 seed: 3 }
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: train_file_data DIR\n";
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    Generator g(11);
    blobs(dir / "blobs_train.csv", 200, g);
    blobs(dir / "blobs_test.csv", 100, g);
    squares(dir / "images" / "train", 24, g);
    squares(dir / "images" / "test", 8, g);
    write_text(dir / "csv.pbtxt", kCsvModel);
    write_text(dir / "images.pbtxt", kImageModel);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_file_data: " << e.what() << "\n";
    return 1;
  }
}
