// CsvDataset: a table of numbers in a CSV file as a data set. One column is the label (chosen by
// header name or by index; the last column by default), the others are the features, float32
// [F]. Labels are int64 class ids (non-negative integers) or, with label_is_class = false,
// float32 values for regression. The header row is detected (a first row that is not all numbers)
// or forced on or off. Every malformed row is an ember::Error naming the file, the line number
// and the column.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace ember::data {

enum class CsvHeader { Auto, Yes, No };

struct CsvOptions {
  std::string label_column;  // by header name (needs a header row)
  int64_t label_index = -1;  // by 0-based index; negative counts from the end (-1: the last column)
  CsvHeader header = CsvHeader::Auto;
  char delimiter = ',';
  bool label_is_class = true;
  // Every column is a feature (rows to predict, which have no label): `labels` stays empty and the
  // label options are not read.
  bool no_label = false;
  Transform transform;  // applied to each feature vector
};

// The parsed table (exposed so tests and tools can read a CSV without making a data set).
struct CsvTable {
  std::vector<std::string> feature_names;  // "column<i>" when there is no header
  std::string label_name;
  Tensor features;                 // float32 [N, F]
  Tensor labels;                   // int64 [N] or float32 [N]
  int64_t largest_label_line = 0;  // the first line that holds the largest label (what messages name)
};
CsvTable read_csv(const std::string& path, const CsvOptions& opts = {});

class CsvDataset : public TensorDataset {
 public:
  explicit CsvDataset(const std::string& path, CsvOptions opts = {});
  const std::vector<std::string>& feature_names() const { return feature_names_; }
  const std::string& label_name() const { return label_name_; }
  int64_t num_features() const { return static_cast<int64_t>(feature_names_.size()); }
  // 1 + the largest class id (class labels only), and the first line of the file that holds it
  // (a network with fewer outputs is refused naming it).
  int64_t num_classes() const { return num_classes_; }
  int64_t largest_label_line() const { return largest_label_line_; }

 private:
  CsvDataset(CsvTable table, Transform transform, bool label_is_class);
  std::vector<std::string> feature_names_;
  std::string label_name_;
  int64_t num_classes_ = 0;
  int64_t largest_label_line_ = 0;
};

}  // namespace ember::data
