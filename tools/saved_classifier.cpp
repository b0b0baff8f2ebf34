#include "tools/saved_classifier.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "data/csv_dataset.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/transforms.h"
#include "layers/checkpoint.h"
#include "tools/flags.h"
#include "tools/model_file_data.h"
#include "tools/saved_model.h"
#include "train/class_record.h"

namespace ember::tools {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The zoo's name of a model the examples record by its type ("MnistCnn"), or "".
std::string zoo_name_of(const std::string& recorded) {
  if (recorded == "MnistCnn") return "mnist_cnn";
  if (recorded == "LeNet5") return "lenet5";
  return "";
}

void from_zoo(SavedClassifier& m, SavedCheckpoint& ckpt, const std::string& name) {
  if (name != "mnist_cnn" && name != "lenet5")
    throw UsageError("--model: '" + name +
                     "' is not an image classifier of the zoo (expected mnist_cnn or lenet5; any other classifier "
                     "through --model-file)");
  std::vector<Tensor> example;
  m.net = zoo_model(name, ckpt, 1, 1, example);
  m.what = m.net->type_name() + " (" + name + ")";
  m.kind = InputKind::Mnist;
  m.input_shape = {1, 28, 28};
  m.normalize = train::kMnistNormalize;
}

// The classifier network of model file `path` and how its data are read; `recorded`: the path is
// the one the checkpoint records (not a flag), which may have moved since.
void from_model_file(SavedClassifier& m, SavedCheckpoint& ckpt, const std::string& path, bool recorded) {
  EMBER_CHECK(!recorded || fs::exists(path), m.checkpoint, ": it was trained from the model file ", path,
              ", which is not there now: pass --model-file FILE.pbtxt");
  m.file = model_file::load(path);
  const auto& s = m.file->spec;
  EMBER_CHECK(!s.has_gan() && !s.has_language_model(), path, ": it trains a ", s.has_gan() ? "GAN" : "language model",
              "; ember eval and ember predict take classifiers (ember eval also a model file's language model)");
  std::vector<Tensor> example;
  m.net = model_file_network(path, "", ckpt, 1, example);
  const auto& n = s.network(model_file::network_index(*m.file, s.classifier().network(), "classifier"));
  m.what = "network '" + n.name() + "' of " + path;
  m.input_shape = Shape(n.input_shape().begin(), n.input_shape().end());
  const auto& d = s.data();
  if (d.has_mnist()) {
    m.kind = InputKind::Mnist;
    m.normalize = mnist_normalize(*m.file);
  } else if (d.has_image_folder()) {
    const data::ImageFolderOptions o = image_folder_options(*m.file);
    m.kind = InputKind::Images;
    m.channels = o.channels, m.height = o.height, m.width = o.width;
    m.normalize = image_folder_normalize(*m.file);
  } else {
    EMBER_CHECK(d.has_csv(), path, ": its data are not MNIST, an image folder or CSV rows");
    m.kind = InputKind::Csv;
    m.csv_label_column = d.csv().label_column();
    EMBER_CHECK(m.input_shape.size() == 1, path, ": a CSV model's input_shape must be [features]");
  }
}

// The width of the network's output (its classes), checking it is a classifier's [N, classes].
int64_t output_count(SavedClassifier& m) {
  NoGradGuard ng;
  m.net->eval();
  Shape shape{1};
  shape.insert(shape.end(), m.input_shape.begin(), m.input_shape.end());
  const Tensor y = (*m.net)(zeros(shape));
  EMBER_CHECK(y.dim() == 2, m.what, " gives outputs of ", shape_str(y.shape()),
              " per example (expected [1, classes]: a classifier's logits)");
  return y.size(1);
}

// The input normalisation and the class names the checkpoint records; for an older checkpoint,
// what the model file or the example defines (MNIST's classes by the recorded data name, the model
// file's training folder as it is now), else class numbers, with a note of what it lacked.
void apply_record(SavedClassifier& m, int64_t outputs) {
  auto lacks = [&](const std::string& what, const std::string& instead) {
    m.notes.push_back(m.checkpoint + " records no " + what + " (written before checkpoints recorded it): " + instead);
  };
  if (auto n = train::recorded_normalize(m.meta))
    m.normalize = *n;
  else if (m.kind != InputKind::Csv)
    lacks("input normalisation", m.file ? "using the model file's" : "using the example's");
  if (auto c = train::recorded_classes(m.meta)) {
    m.classes = *c;
  } else if (m.kind == InputKind::Mnist && m.meta.count("data")) {
    m.classes = train::mnist_class_names(m.meta.at("data"));
  } else if (m.kind == InputKind::Images &&
             fs::is_directory(m.file->resolve(m.file->spec.data().image_folder().train()))) {
    const std::string train = m.file->resolve(m.file->spec.data().image_folder().train());
    m.classes = data::ImageFolder(train, {.height = m.height, .width = m.width, .channels = m.channels}).classes();
    lacks("class names", "taken from the training folder " + train + " as it is now");
  } else {
    for (int64_t i = 0; i < outputs; ++i) m.classes.push_back(std::to_string(i));
    if (m.kind != InputKind::Csv) lacks("class names", "classes are numbered");
  }
  EMBER_CHECK(static_cast<int64_t>(m.classes.size()) == outputs, m.checkpoint, ": it names ", m.classes.size(),
              " classes (", joined(m.classes), ") but ", m.what, " has ", outputs, " outputs");
}

// uint8 [H, W] pixels of a float image [1, H, W] in [0, 1], rounded as an 8-bit image stores them.
Tensor to_pixels(const Tensor& chw) {
  const Tensor src = chw.contiguous();
  Tensor out = empty({src.size(1), src.size(2)}, {DType::UInt8, Device::cpu()});
  const float* s = src.data_ptr<float>();
  uint8_t* d = out.data_ptr<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i)
    d[i] = static_cast<uint8_t>(std::lround(std::clamp(s[i], 0.0f, 1.0f) * 255.0f));
  return out;
}

// A folder of images in class subfolders, read by the model's read_image, labelled by the
// model's index of each subfolder's class (by name, or by number).
class ImageFiles : public data::Dataset {
 public:
  ImageFiles(const SavedClassifier& m, std::vector<std::pair<std::string, int64_t>> samples)
      : m_(m), samples_(std::move(samples)) {}
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  data::Example get(int64_t i, Generator&) const override {
    const auto& [path, label] = samples_.at(static_cast<size_t>(i));
    return {m_.read_image(path), scalar_tensor(static_cast<double>(label), {.dtype = DType::Int64})};
  }

 private:
  const SavedClassifier& m_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

TestSet folder_set(const SavedClassifier& m, const std::string& dir, int64_t limit) {
  const data::ImageFolder listing(dir, {.height = m.height, .width = m.width, .channels = m.channels});
  std::vector<int64_t> to_model;
  for (const std::string& name : listing.classes()) {
    to_model.push_back(m.class_index(name));
    EMBER_CHECK(to_model.back() >= 0, "--data ", dir, ": its class folder '", name,
                "' is none of the model's classes (", joined(m.classes), ") nor a class number below ",
                m.classes.size());
  }
  std::vector<std::pair<std::string, int64_t>> samples;
  for (const auto& [path, label] : listing.samples()) {
    if (limit >= 0 && static_cast<int64_t>(samples.size()) >= limit) break;
    samples.emplace_back(path, to_model[static_cast<size_t>(label)]);
  }
  return {std::make_unique<ImageFiles>(m, std::move(samples)), "the image folder " + dir};
}

// MNIST's test set in `data` (or the folder the checkpoint records, or the examples' default), or
// an image folder of class subfolders given as --data.
TestSet mnist_test_set(const SavedClassifier& m, const std::string& data, int64_t limit) {
  std::string dir = data;
  bool given = !data.empty();
  if (given && fs::is_directory(dir) && !data::MNIST::available(dir)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory()) return folder_set(m, dir, limit);
  } else if (!given && m.meta.count("flag.data")) {
    dir = m.meta.at("flag.data"), given = true;
    EMBER_CHECK(data::MNIST::available(dir), m.checkpoint, ": it was trained on the MNIST files in ", dir,
                ", which are not there now: pass --data DIR");
  } else if (!given && m.file && !m.file->spec.data().mnist().dir().empty()) {
    dir = m.file->resolve(m.file->spec.data().mnist().dir()), given = true;
  } else if (!given) {
    dir = train::kDefaultMnistDir;
  }
  auto [root, name] = train::find_mnist_data(dir, given);
  if (data.empty() && m.meta.count("data")) name = m.meta.at("data");  // MNIST or Fashion-MNIST, as trained on
  return {std::make_unique<data::MNIST>(root, data::Split::Test,
                                        data::MnistOptions{.normalize = m.normalize, .limit = limit}),
          "the " + name + " test set in " + root};
}

TestSet csv_test_set(const SavedClassifier& m, const std::string& data, int64_t limit) {
  const std::string path = data.empty() ? m.file->resolve(m.file->spec.data().csv().test()) : data;
  auto set = std::make_unique<data::CsvDataset>(path, data::CsvOptions{.label_column = m.csv_label_column});
  EMBER_CHECK(set->num_features() == m.input_shape[0], "the CSV file ", path, " has ", set->num_features(),
              " feature columns but ", m.what, " takes ", m.input_shape[0]);
  EMBER_CHECK(set->num_classes() <= static_cast<int64_t>(m.classes.size()), "the CSV file ", path,
              " has class labels up to ", set->num_classes() - 1, " but ", m.what, " has ", m.classes.size(),
              " classes");
  std::unique_ptr<data::Dataset> out = std::move(set);
  if (limit >= 0) out = std::make_unique<data::FirstN>(std::move(out), limit);
  return {std::move(out), "the CSV file " + path};
}

}  // namespace

Tensor SavedClassifier::read_image(const std::string& path) const {
  EMBER_CHECK(kind != InputKind::Csv, what, " reads CSV rows, not images (", path, ")");
  if (kind == InputKind::Images) {
    Tensor x = data::read_image_resized(path, channels, height, width);
    if (!normalize) return x;
    Generator unused(0);
    return data::transforms::normalize({normalize->first}, {normalize->second})(x, unused);
  }
  // MNIST's: grey 8-bit pixels through the formula its test set's pass through.
  Tensor px = data::read_image(path, 1);
  px = px.size(0) == height && px.size(1) == width ? px.reshape({height, width}).contiguous()
                                                   : to_pixels(data::read_image_resized(path, 1, height, width));
  return data::MNIST::pixels_to_float(px, normalize).reshape({1, height, width});
}

int64_t SavedClassifier::class_index(const std::string& name) const {
  auto it = std::find(classes.begin(), classes.end(), name);
  if (it != classes.end()) return it - classes.begin();
  if (name.empty() || name.size() > 9 || !std::all_of(name.begin(), name.end(), ::isdigit)) return -1;
  const int64_t i = std::stoll(name);
  return i < static_cast<int64_t>(classes.size()) ? i : -1;
}

SavedClassifier open_classifier(SavedCheckpoint& ckpt, const ModelChoice& choice) {
  if (!choice.model.empty() && !choice.model_file.empty()) throw UsageError("give one of --model and --model-file");
  SavedClassifier m;
  const std::string& checkpoint = ckpt.path();
  m.checkpoint = checkpoint;
  m.meta = ckpt.contents().metadata;
  const auto recorded = [&](const char* key) { return m.meta.count(key) ? m.meta.at(key) : std::string(); };
  if (!choice.model_file.empty())
    from_model_file(m, ckpt, choice.model_file, false);
  else if (!choice.model.empty())
    from_zoo(m, ckpt, choice.model);
  else if (!recorded("model_file").empty())
    from_model_file(m, ckpt, recorded("model_file"), true);
  else if (!zoo_name_of(recorded("model")).empty())
    from_zoo(m, ckpt, zoo_name_of(recorded("model")));
  else if (!recorded("model").empty())
    EMBER_FAIL(checkpoint, ": it holds a ", recorded("model"),
               "; ember eval and ember predict rebuild the zoo's image classifiers (mnist_cnn, lenet5) and the "
               "classifiers of model files (--model-file)");
  else
    EMBER_FAIL(checkpoint,
               ": it records no model (a model file written before checkpoints recorded one): pass --model mnist_cnn "
               "(or lenet5) or --model-file FILE.pbtxt");
  apply_record(m, output_count(m));
  return m;
}

TestSet open_test_set(const SavedClassifier& m, const std::string& data, int64_t limit) {
  switch (m.kind) {
    case InputKind::Csv:
      return csv_test_set(m, data, limit);
    case InputKind::Images:
      return folder_set(m, data.empty() ? m.file->resolve(m.file->spec.data().image_folder().test()) : data, limit);
    default:
      return mnist_test_set(m, data, limit);
  }
}

std::vector<std::string> image_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    std::error_code ec;
    EMBER_CHECK(fs::exists(in, ec), "--input ", in, " does not exist (expected an image file or a folder of them)");
    if (!fs::is_directory(in, ec)) {
      out.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(in, ec)) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
      if (e.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp"))
        found.push_back(e.path().string());
    }
    EMBER_CHECK(!found.empty(), "--input ", in, ": the folder holds no PNG, JPEG or BMP images");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace ember::tools
