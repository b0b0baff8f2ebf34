// How a model file reads its data, shared by `ember train` (the training and test sets) and
// `ember eval` / `ember predict` (new data read as the training read its own): the MNIST
// normalisation, the image folder's size, channels and normalisation, and a language model's corpus.
#pragma once

#include <utility>

#include "data/image_folder.h"
#include "data/transforms.h"
#include "interop/model_file.h"
#include "train/class_record.h"
#include "train/language_model.h"

namespace ember::cli {

// data.mnist's (mean, std), MNIST's usual values unless the file gives its own.
inline std::pair<double, double> mnist_normalize(const model_file::LoadedFile& file) {
  const auto& m = file.spec.data().mnist();
  return {m.has_mean() ? m.mean() : train::kMnistNormalize.first,
          m.has_std() ? m.std() : train::kMnistNormalize.second};
}

// data.image_folder's mean and std when it gives them (nullopt: the images stay in [0, 1]).
inline std::optional<std::pair<double, double>> image_folder_normalize(const model_file::LoadedFile& file) {
  const auto& f = file.spec.data().image_folder();
  if (!f.has_mean() && !f.has_std()) return std::nullopt;
  const double sd = f.has_std() ? f.std() : 1.0;
  EMBER_CHECK(sd > 0, file.at_top("data"), ": data.image_folder.std must be positive");
  return std::make_pair(f.mean(), sd);
}

// data.image_folder's images: resized to its height and width, with its channels (3 unless
// given), normalised as it says; no augmentation.
inline data::ImageFolderOptions image_folder_options(const model_file::LoadedFile& file) {
  const auto& f = file.spec.data().image_folder();
  EMBER_CHECK(f.has_height() && f.has_width(), file.at_top("data"),
              ": data.image_folder needs height and width (every image is resized to them)");
  data::ImageFolderOptions o{
      .height = f.height(), .width = f.width(), .channels = f.has_channels() ? static_cast<int>(f.channels()) : 3};
  if (const auto n = image_folder_normalize(file)) o.transform = data::transforms::normalize({n->first}, {n->second});
  return o;
}

// data.text's folder (from the model file's folder), or Debian's fortunes.
inline std::string text_dir(const model_file::LoadedFile& file) {
  const auto& text = file.spec.data().text();
  return text.dir().empty() ? "/usr/share/games/fortunes" : file.resolve(text.dir());
}

// The corpus data.text describes, read from `dir` (its fortunes), of the first `limit` (-1: all).
inline train::CorpusOptions corpus_options(const model_file::LoadedFile& file, const std::string& dir, int64_t limit) {
  const auto& text = file.spec.data().text();
  return {.data_dir = dir,
          .level = text.level().empty() ? "char" : text.level(),
          .lowercase = text.lowercase(),
          .min_freq = text.min_freq(),
          .max_vocab = text.has_max_vocab() ? text.max_vocab() : 10000,
          .test_fraction = text.has_test_fraction() ? text.test_fraction() : 0.1,
          .split_seed = text.has_split_seed() ? text.split_seed() : 1234,
          .limit = limit};
}

}  // namespace ember::cli
