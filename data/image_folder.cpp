#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/ops.h"
#include "data/image.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {
std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const auto& n : names) out += (out.size() > 1 ? ", " : "") + n;
  return out + "]";
}

// The label of each of `found` (the folder's subfolders, sorted): its position in `given`, or in
// `found` itself when `given` is empty.
std::vector<int64_t> labels_of(const std::string& root, const std::vector<std::string>& found,
                               const std::vector<std::string>& given) {
  std::vector<int64_t> labels;
  for (size_t i = 0; i < found.size(); ++i) {
    if (given.empty()) {
      labels.push_back(static_cast<int64_t>(i));
      continue;
    }
    const auto it = std::find(given.begin(), given.end(), found[i]);
    EMBER_CHECK(it != given.end(), "ImageFolder: '", root, "' has classes ", listed(found),
                ", but the training set's are ", listed(given), ": '", found[i],
                "' is not among them (expected the same class subfolders, or some of them)");
    labels.push_back(static_cast<int64_t>(it - given.begin()));
  }
  return labels;
}
}  // namespace

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions opts) : opts_(std::move(opts)) {
  EMBER_CHECK(opts_.height > 0 && opts_.width > 0, "ImageFolder('", root,
              "'): height and width must be given (every image is resized to them), got ", opts_.height, "x",
              opts_.width);
  EMBER_CHECK(opts_.channels == 1 || opts_.channels == 3 || opts_.channels == 4, "ImageFolder('", root,
              "'): channels must be 1, 3 or 4, got ", opts_.channels);
  EMBER_CHECK(fs::is_directory(root), "ImageFolder: '", root,
              "' is not a directory (expected root/<class>/<image> with one subfolder per class)");
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(root)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && !name.empty() && name[0] != '.') found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  EMBER_CHECK(!found.empty(), "ImageFolder: '", root, "' has no class subfolders (expected root/<class>/<image>)");
  const std::vector<int64_t> labels = labels_of(root, found, opts_.classes);
  classes_ = opts_.classes.empty() ? found : opts_.classes;
  std::vector<std::string> exts;
  for (const auto& e : opts_.extensions) exts.push_back(lower(e));
  for (size_t i = 0; i < found.size(); ++i) {
    const int64_t label = labels[i];
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(fs::path(root) / found[i])) {
      std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || name.empty() || name[0] == '.') continue;
      if (std::find(exts.begin(), exts.end(), lower(entry.path().extension().string())) == exts.end()) continue;
      files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      if (opts_.skip_corrupt) {
        try {
          read_image(f, opts_.channels);
        } catch (const Error& e) {
          std::fprintf(stderr, "warning: ImageFolder skips %s\n", e.what());
          skipped_.push_back(f);
          continue;
        }
      }
      samples_.emplace_back(std::move(f), label);
    }
  }
  EMBER_CHECK(!samples_.empty(), "ImageFolder: no ", opts_.skip_corrupt ? "decodable " : "", "images under '", root,
              "' (looked for ", opts_.extensions.size(), " extensions in ", classes_.size(), " class folders)");
}

Tensor ImageFolder::load(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "ImageFolder: index ", index, " is out of range [0, ", size(), ")");
  return read_image_resized(samples_[static_cast<size_t>(index)].first, opts_.channels, opts_.height, opts_.width);
}

Example ImageFolder::get(int64_t index, Generator& gen) const {
  Tensor x = load(index);
  if (opts_.transform) x = opts_.transform(x, gen);
  return {x, scalar_tensor(static_cast<double>(samples_[static_cast<size_t>(index)].second), {.dtype = DType::Int64})};
}

}  // namespace ember::data
