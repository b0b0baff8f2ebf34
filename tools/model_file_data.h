// How a classifier's model file reads its images, shared by `ember train` (the training and test
// sets) and `ember eval` / `ember predict` (new images read as the training read its own): the
// MNIST normalisation and the image folder's size, channels and normalisation.
#pragma once

#include <utility>

#include "common/class_record.h"
#include "data/image_folder.h"
#include "data/transforms.h"
#include "interop/model_file.h"

namespace ember::cli {

// data.mnist's (mean, std), MNIST's usual values unless the file gives its own.
inline std::pair<double, double> mnist_normalize(const model_file::LoadedFile& file) {
  const auto& m = file.spec.data().mnist();
  return {m.has_mean() ? m.mean() : examples::kMnistNormalize.first,
          m.has_std() ? m.std() : examples::kMnistNormalize.second};
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
  EMBER_CHECK(f.height() > 0 && f.width() > 0, file.at_top("data"),
              ": data.image_folder needs height and width (every image is resized to them)");
  data::ImageFolderOptions o{
      .height = f.height(), .width = f.width(), .channels = f.channels() == 0 ? 3 : static_cast<int>(f.channels())};
  if (const auto n = image_folder_normalize(file)) o.transform = data::transforms::normalize({n->first}, {n->second});
  return o;
}

}  // namespace ember::cli
