#include "data/mnist.h"

#include <filesystem>

#include "core/error.h"
#include "core/parallel.h"
#include "data/idx.h"

namespace ember::data {

namespace {
const char* kStems[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                            {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
}

std::string MNIST::find_file(const std::string& root, const std::string& stem) {
  namespace fs = std::filesystem;
  for (const std::string& name : {stem, stem + ".gz"}) {
    fs::path p = fs::path(root) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  return "";
}

bool MNIST::available(const std::string& root) {
  for (auto& split : kStems)
    for (const char* stem : split)
      if (find_file(root, stem).empty()) return false;
  return true;
}

MNIST::MNIST(const std::string& root, Split split, MnistOptions opts) : opts_(std::move(opts)) {
  EMBER_CHECK(std::filesystem::is_directory(root), "MNIST: data directory '", root,
              "' does not exist (expected a directory holding the four IDX files; see scripts/download-mnist.sh)");
  const int s = split == Split::Train ? 0 : 1;
  std::string img = find_file(root, kStems[s][0]), lab = find_file(root, kStems[s][1]);
  EMBER_CHECK(!img.empty(), "MNIST: '", root, "' has no ", kStems[s][0], "[.gz]");
  EMBER_CHECK(!lab.empty(), "MNIST: '", root, "' has no ", kStems[s][1], "[.gz]");
  images_ = read_idx(img);
  Tensor labels = read_idx(lab);
  EMBER_CHECK(images_.dtype() == DType::UInt8 && images_.dim() == 3, "MNIST: '", img,
              "' must hold unsigned bytes of shape [N, rows, cols], got ", dtype_name(images_.dtype()), " ",
              shape_str(images_.shape()));
  EMBER_CHECK(labels.dtype() == DType::UInt8 && labels.dim() == 1, "MNIST: '", lab,
              "' must hold unsigned bytes of shape [N], got ", dtype_name(labels.dtype()), " ",
              shape_str(labels.shape()));
  EMBER_CHECK(labels.size(0) == images_.size(0), "MNIST: '", img, "' has ", images_.size(0), " images but '", lab,
              "' has ", labels.size(0), " labels");
  const uint8_t* l = labels.data_ptr<uint8_t>();
  for (int64_t i = 0; i < labels.size(0); ++i)
    EMBER_CHECK(l[i] < 10, "MNIST: '", lab, "' has label ", int(l[i]), " at index ", i, " (expected 0..9)");
  labels_ = labels.to(DType::Int64);
  if (opts_.limit >= 0 && opts_.limit < images_.size(0)) {
    images_ = images_.slice(0, 0, opts_.limit).contiguous();
    labels_ = labels_.slice(0, 0, opts_.limit).contiguous();
  }
}

Tensor MNIST::to_float(const Tensor& u8) const {
  return pixels_to_float(u8, opts_.normalize);
}

Tensor MNIST::pixels_to_float(const Tensor& u8, const std::optional<std::pair<double, double>>& normalize) {
  EMBER_CHECK(u8.dtype() == DType::UInt8 && u8.is_contiguous() && u8.device().is_cpu(),
              "MNIST::pixels_to_float: expected contiguous uint8 pixels on the CPU, got ", dtype_name(u8.dtype()));
  Tensor out = empty(u8.shape(), {DType::Float32, Device::cpu()});
  const uint8_t* src = u8.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  float scale = 1.0f / 255.0f, shift = 0.0f;
  if (normalize) {
    scale /= static_cast<float>(normalize->second);
    shift = -static_cast<float>(normalize->first / normalize->second);
  }
  parallel_for(0, out.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = static_cast<float>(src[i]) * scale + shift;
  });
  return out;
}

Example MNIST::get(int64_t index, Generator& gen) const {
  EMBER_CHECK(index >= 0 && index < size(), "MNIST: index ", index, " is out of range [0, ", size(), ")");
  Tensor x = to_float(images_.select(0, index).contiguous()).unsqueeze(0);
  if (opts_.transform) x = opts_.transform(x, gen);
  return {x, labels_.select(0, index)};
}

Example MNIST::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const {
  if (opts_.transform) return Dataset::get_batch(indices, gens);
  Tensor x = to_float(gather_rows(images_, indices)).unsqueeze(1);
  return {x, gather_rows(labels_, indices)};
}

}  // namespace ember::data
