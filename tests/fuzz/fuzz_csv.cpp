// CSV data sets (`--data table.csv`, data/csv_dataset.h) on arbitrary bytes. The first byte picks
// the options a user can: header detection, class or regression labels, rows without a label, the
// delimiter, and the label column by name or index; the rest is the file. A table that loads must
// hold finite features, one label per row and, for classes, non-negative whole labels.
#include <cmath>

#include "data/csv_dataset.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t o = data[0];
  ember::data::CsvOptions opt;
  static const ember::data::CsvHeader kHeader[4] = {ember::data::CsvHeader::Auto, ember::data::CsvHeader::Yes,
                                                    ember::data::CsvHeader::No, ember::data::CsvHeader::Auto};
  static const char kDelimiter[4] = {',', ';', '\t', ' '};
  opt.header = kHeader[o & 3];
  opt.label_is_class = (o & 4) == 0;
  opt.no_label = (o & 8) != 0;
  opt.delimiter = kDelimiter[(o >> 4) & 3];
  if (o & 64) opt.label_column = "label";
  opt.label_index = (o & 128) ? 0 : -1;
  const std::string& path = fuzz::scratch_file(data + 1, size - 1, ".csv");
  fuzz::errors_only([&] {
    const ember::data::CsvTable t = ember::data::read_csv(path, opt);
    const int64_t rows = t.features.size(0), features = t.features.size(1);
    if (rows <= 0 || features != static_cast<int64_t>(t.feature_names.size())) std::abort();
    if (opt.no_label ? t.labels.defined() : t.labels.numel() != rows) std::abort();
    for (float v : t.features.to_vector<float>())
      if (!std::isfinite(v)) std::abort();
    if (!opt.no_label && opt.label_is_class)
      for (int64_t c : t.labels.to_vector<int64_t>())
        if (c < 0) std::abort();
  });
  return 0;
}
