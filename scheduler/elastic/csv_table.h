// A small reader for the numeric CSV files of Pollux's artifact (../shared/data/pollux): a header
// row naming the columns, then rows of plain comma-separated fields (the artifact's files quote
// nothing). Every problem is an ember::Error naming the file, the line and what was expected.
#pragma once

#include <string>
#include <vector>

namespace ember::sched::elastic {

struct CsvTable {
  std::string source;  // what errors call it (the path)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;  // each row's line number in the file

  // The column's index; ember::Error naming the file and the columns it has when it is missing.
  int column(const std::string& name) const;
  // Row `i`'s field of column `c` as a finite number (>= `min`), or as text.
  double number(size_t i, int c, double min = -1e300) const;
  long integer(size_t i, int c, long min) const;
  const std::string& text(size_t i, int c) const;
};

// Reads a whole file: ember::Error when it cannot be opened, has no header, a row whose field
// count differs from the header's, or no rows.
CsvTable read_csv_table(const std::string& path);
CsvTable parse_csv_table(const std::string& text, const std::string& source);

}  // namespace ember::sched::elastic
