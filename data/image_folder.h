// ImageFolder: a classification data set laid out as root/<class>/<image>, one subfolder per
// class (classes are the subfolder names in sorted order, labels their positions, or positions
// in a given class list: ImageFolderOptions::classes). PNG, JPEG and
// BMP files are decoded with stb_image when an example is requested (so the DataLoader's workers
// decode in parallel), converted to `channels`, resized bilinearly to height x width and handed
// out as float32 [C, H, W] in [0, 1] with an int64 label. A file that cannot be decoded is an
// ember::Error naming it; with skip_corrupt every file is decoded once up front and the ones
// that fail are left out, each with a warning on stderr.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace ember::data {

struct ImageFolderOptions {
  int64_t height = 0;  // required: every image is resized to height x width
  int64_t width = 0;
  int channels = 3;  // 1 (grey), 3 (RGB) or 4 (RGBA)
  bool skip_corrupt = false;
  Transform transform;  // applied to each float image after resizing
  // Files with other extensions (compared without case) are ignored, as are hidden files.
  std::vector<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp"};
  // Given (a test set: the training set's classes()), labels are positions in this list rather
  // than in the folder's own subfolders, which may be fewer; a subfolder that is not in it is an
  // ember::Error naming both lists. A test set numbered by its own subfolders once scored a model
  // trained on {cat, dog, eel} against labels shifted by one, with status 0.
  std::vector<std::string> classes;
};

class ImageFolder : public Dataset {
 public:
  ImageFolder(const std::string& root, ImageFolderOptions opts);
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Example get(int64_t index, Generator& gen) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  // (path, label) of every example, in index order.
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }
  // Files left out because they could not be decoded (skip_corrupt only).
  const std::vector<std::string>& skipped() const { return skipped_; }
  // The example's image before the transform: float32 [C, height, width].
  Tensor load(int64_t index) const;

 private:
  ImageFolderOptions opts_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> samples_;
  std::vector<std::string> skipped_;
};

}  // namespace ember::data
