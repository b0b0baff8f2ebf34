#include "train/class_record.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "train/training.h"

namespace ember::train {

std::vector<std::string> mnist_class_names(const std::string& data_name) {
  if (data_name == "Fashion-MNIST")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

std::map<std::string, std::string> class_record(const std::vector<std::string>& classes,
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

std::optional<std::vector<std::string>> recorded_classes(const std::map<std::string, std::string>& meta) {
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

std::optional<std::optional<std::pair<double, double>>> recorded_normalize(
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

}  // namespace ember::train
