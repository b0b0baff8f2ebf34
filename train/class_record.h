// What a classifier's checkpoints record, beyond its weights, for `ember eval` and `ember predict`
// (tools/saved_classifier.h) to read new inputs exactly as training read its data and to name the
// classes: metadata "classes" (the names in label order, comma-separated, as bilstm_classify
// writes them) and "input.normalize" ("MEAN,STD" applied to pixels in [0, 1], or "none").
// Checkpoints written before these keys existed lack them; the tools then say so and fall back to
// what the model file or the example defines.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

// The normalisation of MNIST and Fashion-MNIST pixels in the examples and model files (mean, std).
inline constexpr std::pair<double, double> kMnistNormalize{0.1307, 0.3081};

// The classes of MNIST-format data by the name the programs give the data ("Fashion-MNIST" or
// "MNIST", CommonFlags::data_name): Fashion-MNIST's ten garments, else the digits.
std::vector<std::string> mnist_class_names(const std::string& data_name);

// The metadata entries of a classifier's classes (empty: not known, left out; names holding a
// comma cannot be recorded and are left out too) and its input normalisation.
std::map<std::string, std::string> class_record(const std::vector<std::string>& classes,
                                                const std::optional<std::pair<double, double>>& normalize);

// The class names a checkpoint's metadata records, or nullopt.
std::optional<std::vector<std::string>> recorded_classes(const std::map<std::string, std::string>& meta);

// The input normalisation a checkpoint's metadata records: nullopt when it records none (an older
// checkpoint); an empty optional inside when it records "none".
std::optional<std::optional<std::pair<double, double>>> recorded_normalize(
    const std::map<std::string, std::string>& meta);

}  // namespace ember::train
