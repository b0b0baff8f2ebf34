// What a classifier's checkpoints record, beyond its weights, for `ember eval` and `ember predict`
// (tools/saved_classifier.h) to read new inputs exactly as training read its data and to name the
// classes: metadata "classes" (the names in label order, comma-separated, as bilstm_classify
// writes them) and "input.normalize" ("MEAN,STD" applied to pixels in [0, 1], or "none").
// Checkpoints written before these keys existed lack them; the tools then say so and fall back to
// what the model file or the example defines.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/training.h"

namespace ember::examples {

// The normalisation of MNIST and Fashion-MNIST pixels in the examples and model files (mean, std).
inline constexpr std::pair<double, double> kMnistNormalize{0.1307, 0.3081};

// The classes of MNIST-format data by the name the examples give the data ("Fashion-MNIST" or
// "MNIST", CommonFlags::data_name): Fashion-MNIST's ten garments, else the digits.
inline std::vector<std::string> mnist_class_names(const std::string& data_name) {
  if (data_name == "Fashion-MNIST")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

// The metadata entries of a classifier's classes (empty: not known, left out; names holding a
// comma cannot be recorded and are left out too) and its input normalisation.
inline std::map<std::string, std::string> class_record(const std::vector<std::string>& classes,
                                                       const std::optional<std::pair<double, double>>& normalize) {
  std::map<std::string, std::string> meta{
      {"input.normalize",
       normalize ? exact_number(normalize->first) + "," + exact_number(normalize->second) : std::string("none")}};
  std::string joined;
  for (const std::string& c : classes) {
    if (c.find(',') != std::string::npos) return meta;
    joined += (joined.empty() ? "" : ",") + c;
  }
  if (!classes.empty()) meta["classes"] = joined;
  return meta;
}

// The class names a checkpoint's metadata records, or nullopt.
inline std::optional<std::vector<std::string>> recorded_classes(const std::map<std::string, std::string>& meta) {
  auto it = meta.find("classes");
  if (it == meta.end() || it->second.empty()) return std::nullopt;
  std::vector<std::string> out;
  for (size_t at = 0; at <= it->second.size();) {
    const size_t comma = std::min(it->second.find(',', at), it->second.size());
    out.push_back(it->second.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// The input normalisation a checkpoint's metadata records: nullopt when it records none (an older
// checkpoint); an empty optional inside when it records "none".
inline std::optional<std::optional<std::pair<double, double>>> recorded_normalize(
    const std::map<std::string, std::string>& meta) {
  auto it = meta.find("input.normalize");
  if (it == meta.end()) return std::nullopt;
  if (it->second == "none") return std::optional<std::pair<double, double>>();
  const size_t comma = it->second.find(',');
  EMBER_CHECK(comma != std::string::npos, "checkpoint metadata input.normalize is '", it->second,
              "' (expected MEAN,STD or none)");
  const double mean = std::strtod(it->second.c_str(), nullptr),
               sd = std::strtod(it->second.c_str() + comma + 1, nullptr);
  EMBER_CHECK(sd > 0, "checkpoint metadata input.normalize is '", it->second, "' (expected a positive std)");
  return std::optional<std::pair<double, double>>(std::make_pair(mean, sd));
}

}  // namespace ember::examples
