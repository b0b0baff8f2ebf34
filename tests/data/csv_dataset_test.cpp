// CsvDataset: header detection, label column by name or index, class and regression labels,
// and errors that give the line and column.
#include "data/csv_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/dataloader.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::data;
using test_util::expect_error;
namespace fs = std::filesystem;

namespace {

struct CsvFile {
  fs::path path;
  explicit CsvFile(const std::string& text, const std::string& name = "t.csv") {
    path = fs::temp_directory_path() / ("ember_csv_" + std::to_string(::getpid()) + "_" + name);
    std::ofstream(path) << text;
  }
  ~CsvFile() { fs::remove(path); }
  std::string str() const { return path.string(); }
};

}  // namespace

TEST(CsvDataset, HeaderAndLabelByName) {
  CsvFile f("x1, label ,x2\r\n1.5,2,-3\n\n4,0,5e-1\n");
  CsvDataset ds(f.str(), {.label_column = "label"});
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.feature_names(), (std::vector<std::string>{"x1", "x2"}));
  EXPECT_EQ(ds.label_name(), "label");
  EXPECT_EQ(ds.num_classes(), 3);
  EXPECT_EQ(ds.largest_label_line(), 2);
  Generator g(0);
  Example e = ds.get(0, g);
  EXPECT_EQ(e.input.to_vector<float>(), (std::vector<float>{1.5f, -3.0f}));
  EXPECT_EQ(e.target.item<int64_t>(), 2);
  EXPECT_EQ(e.target.dtype(), DType::Int64);
  EXPECT_EQ(ds.get(1, g).input.to_vector<float>(), (std::vector<float>{4.0f, 0.5f}));
  DataLoader dl(ds, {.batch_size = 2, .shuffle = false});
  for (auto& [x, y] : dl) {
    EXPECT_EQ(x.shape(), (Shape{2, 2}));
    EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  }
}

TEST(CsvDataset, NoHeaderLabelByIndexAndRegression) {
  CsvFile f("1;2;3\n4;5;6\n", "semi.csv");
  // Auto: an all-numeric first row is data. The last column is the label by default.
  CsvTable t = read_csv(f.str(), {.delimiter = ';'});
  EXPECT_EQ(t.features.to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(t.labels.to_vector<int64_t>(), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"column0", "column1"}));
  CsvTable first = read_csv(f.str(), {.label_index = 0, .delimiter = ';'});
  EXPECT_EQ(first.features.to_vector<float>(), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(first.labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));
  // Forcing a header makes the first row names; regression labels are float32.
  CsvFile r("a,b,y\n0.5,1,2.25\n", "reg.csv");
  CsvTable reg = read_csv(r.str(), {.header = CsvHeader::Yes, .label_is_class = false});
  EXPECT_EQ(reg.labels.dtype(), DType::Float32);
  EXPECT_EQ(reg.labels.to_vector<float>(), (std::vector<float>{2.25f}));
  CsvTable forced = read_csv(f.str(), {.header = CsvHeader::Yes, .delimiter = ';'});
  EXPECT_EQ(forced.features.size(0), 1);
  EXPECT_EQ(forced.label_name, "3");
}

// Rows to predict have no label: every column is a feature, a single one included.
TEST(CsvDataset, NoLabelReadsEveryColumn) {
  CsvFile f("x1,x2\n1,2\n3,4\n", "nolabel.csv");
  CsvTable t = read_csv(f.str(), {.no_label = true});
  EXPECT_EQ(t.features.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.features.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t.feature_names, (std::vector<std::string>{"x1", "x2"}));
  EXPECT_FALSE(t.labels.defined());
  CsvFile one("7\n8\n", "one.csv");
  EXPECT_EQ(read_csv(one.str(), {.no_label = true}).features.shape(), (Shape{2, 1}));
}

TEST(CsvDataset, MalformedFilesGiveLineAndColumn) {
  CsvFile short_row("a,b,c\n1,2,3\n4,5\n", "short.csv");
  expect_error([&] { read_csv(short_row.str()); }, "short.csv' line 3", "expected 3 fields, found 2");
  CsvFile bad_num("a,b,c\n1,2,3\n4,x5,6\n", "badnum.csv");
  expect_error([&] { read_csv(bad_num.str()); }, "badnum.csv' line 3, column 'b'", "'x5' is not a finite number");
  CsvFile nan("1,nan,3\n", "nan.csv");
  // (With header detection on, a first row holding "nan" would be taken for a header.)
  expect_error([&] { read_csv(nan.str(), {.header = CsvHeader::No}); }, "nan.csv' line 1, column 1",
               "not a finite number");
  // A double beyond float32's range (found by fuzz_csv) was stored as infinity.
  CsvFile huge("a,b,y\n2,1e39,1\n", "huge.csv");
  expect_error([&] { read_csv(huge.str()); }, "huge.csv' line 2, column 'b'", "'1e39' is beyond float32's range");
  CsvFile huge_label("a,y\n2,-3.5e38\n", "hugelabel.csv");
  expect_error([&] { read_csv(huge_label.str(), {.label_is_class = false}); }, "hugelabel.csv' line 2, column 'y'",
               "beyond float32's range");
  CsvFile empty_field("a,b\n1,\n", "emptyfield.csv");
  expect_error([&] { read_csv(empty_field.str()); }, "emptyfield.csv' line 2, column 'b'");
  CsvFile neg("a,y\n1,-1\n", "neg.csv");
  expect_error([&] { read_csv(neg.str()); }, "neg.csv' line 2, column 'y'", "not a non-negative integer");
  CsvFile frac("a,y\n1,0.5\n", "frac.csv");
  expect_error([&] { read_csv(frac.str()); }, "frac.csv", "not a non-negative integer");
  EXPECT_NO_THROW(read_csv(frac.str(), {.label_is_class = false}));
  CsvFile hdr("a,b\n1,2\n", "hdr.csv");
  expect_error([&] { read_csv(hdr.str(), {.label_column = "z"}); }, "no column named 'z'", "columns: a, b");
  expect_error([&] { read_csv(hdr.str(), {.label_index = 5}); }, "hdr.csv", "label index 5 is out of range");
  CsvFile noheader("1,2\n", "nohdr.csv");
  expect_error([&] { read_csv(noheader.str(), {.label_column = "b"}); }, "nohdr.csv", "no header row");
  CsvFile onecol("a\n1\n", "onecol.csv");
  expect_error([&] { read_csv(onecol.str()); }, "onecol.csv' line 1", "at least 2 columns");
  CsvFile only_header("a,b\n\n", "onlyheader.csv");
  expect_error([&] { read_csv(only_header.str()); }, "onlyheader.csv", "no data rows");
  expect_error([&] { read_csv("/nonexistent/dir/x.csv"); }, "/nonexistent/dir/x.csv", "does not exist");
  // A folder once got past the open and threw std::ios_failure at the first read.
  expect_error([&] { read_csv(fs::temp_directory_path().string()); }, "is a folder (expected a CSV table)");
}

// The line that holds the largest class label (the first of them; blank lines counted), which the
// message of a classifier with too few outputs names.
TEST(CsvDataset, NamesTheLineOfTheLargestLabel) {
  CsvFile f("1,0\n2,5\n\n3,7\n4,7\n5,1\n");
  CsvDataset ds(f.str());
  EXPECT_EQ(ds.num_classes(), 8);
  EXPECT_EQ(ds.largest_label_line(), 4);
}
