#include "data/csv_dataset.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/ops.h"

namespace ember::data {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& line, char delim) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = line.find(delim, start);
    std::string field = trim(line.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (field.size() >= 2 && field.front() == '"' && field.back() == '"') field = field.substr(1, field.size() - 2);
    out.push_back(field);
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

bool parse_number(const std::string& s, double& v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(v);
}

// The label's column among `cols` (-1 with no_label): by name (the header `names`), else by index.
int64_t label_column_of(const std::string& path, const CsvOptions& opts, const std::vector<std::string>& names,
                        int64_t cols) {
  if (opts.no_label) return -1;
  if (!opts.label_column.empty()) {
    EMBER_CHECK(!names.empty(), "CSV '", path, "': label column '", opts.label_column,
                "' is given by name but the file has no header row");
    for (int64_t i = 0; i < cols; ++i)
      if (names[static_cast<size_t>(i)] == opts.label_column) return i;
    std::string all;
    for (auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw Error("CSV '" + path + "': no column named '" + opts.label_column + "' (columns: " + all + ")");
  }
  int64_t i = opts.label_index < 0 ? cols + opts.label_index : opts.label_index;
  EMBER_CHECK(i >= 0 && i < cols, "CSV '", path, "': label index ", opts.label_index, " is out of range for ", cols,
              " columns");
  return i;
}

}  // namespace

CsvTable read_csv(const std::string& path, const CsvOptions& opts) {
  std::istringstream in(read_input_file(path, "a CSV table"));
  std::vector<std::string> names;
  std::vector<double> feats, labels;
  int64_t ncols = -1, label_col = -1, line_no = 0, rows = 0;
  CsvTable t;
  double largest_label = 0;
  bool header_done = false;
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    std::vector<std::string> fields = split(line, opts.delimiter);
    const int64_t n = static_cast<int64_t>(fields.size());
    if (!header_done) {
      header_done = true;
      bool numeric = true;
      double v;
      for (auto& f : fields) numeric = numeric && parse_number(f, v);
      bool is_header = opts.header == CsvHeader::Yes || (opts.header == CsvHeader::Auto && !numeric);
      EMBER_CHECK(opts.no_label || n >= 2, "CSV '", path, "' line ", line_no,
                  ": need at least 2 columns (features and a label), found ", n, " (is the delimiter '",
                  std::string(1, opts.delimiter), "'?)");
      ncols = n;
      if (is_header) {
        names = fields;
        label_col = label_column_of(path, opts, names, n);
        continue;
      }
      label_col = label_column_of(path, opts, names, n);
    }
    EMBER_CHECK(n == ncols, "CSV '", path, "' line ", line_no, ": expected ", ncols, " fields, found ", n);
    for (int64_t i = 0; i < n; ++i) {
      double v;
      const std::string& f = fields[static_cast<size_t>(i)];
      std::string col =
          names.empty() ? "column " + std::to_string(i) : "column '" + names[static_cast<size_t>(i)] + "'";
      EMBER_CHECK(parse_number(f, v), "CSV '", path, "' line ", line_no, ", ", col, ": '", f,
                  "' is not a finite number");
      // Features and regression labels are float32: a larger double would become infinity there.
      EMBER_CHECK(std::fabs(v) <= std::numeric_limits<float>::max(), "CSV '", path, "' line ", line_no, ", ", col,
                  ": '", f, "' is beyond float32's range (largest ", std::numeric_limits<float>::max(), ")");
      if (i == label_col) {
        if (opts.label_is_class)
          EMBER_CHECK(v >= 0 && v == std::floor(v) && v < 1e9, "CSV '", path, "' line ", line_no, ", ", col,
                      ": class label '", f, "' is not a non-negative integer");
        if (t.largest_label_line == 0 || v > largest_label) largest_label = v, t.largest_label_line = line_no;
        labels.push_back(v);
      } else {
        feats.push_back(v);
      }
    }
    ++rows;
  }
  EMBER_CHECK(!in.bad(), "CSV '", path, "': read error after line ", line_no);
  EMBER_CHECK(rows > 0, "CSV '", path, "' has no data rows");
  for (int64_t i = 0; i < ncols; ++i) {
    std::string name = names.empty() ? "column" + std::to_string(i) : names[static_cast<size_t>(i)];
    if (i == label_col)
      t.label_name = name;
    else
      t.feature_names.push_back(name);
  }
  t.features = from_vector(feats, {rows, ncols - (label_col >= 0 ? 1 : 0)}, TensorOptions{.dtype = DType::Float32});
  const DType label_type = opts.label_is_class ? DType::Int64 : DType::Float32;
  if (label_col >= 0) t.labels = from_vector(labels, {rows}, TensorOptions{.dtype = label_type});
  return t;
}

CsvDataset::CsvDataset(const std::string& path, CsvOptions opts)
    : CsvDataset(read_csv(path, opts), opts.transform, opts.label_is_class) {}

CsvDataset::CsvDataset(CsvTable table, Transform transform, bool label_is_class)
    : TensorDataset(table.features, table.labels, std::move(transform)),
      feature_names_(std::move(table.feature_names)),
      label_name_(std::move(table.label_name)),
      largest_label_line_(table.largest_label_line) {
  if (label_is_class) num_classes_ = static_cast<int64_t>(max(table.labels).item()) + 1;
}

}  // namespace ember::data
