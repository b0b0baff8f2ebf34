#include "scheduler/elastic/csv_table.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ember::sched::elastic {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    const size_t comma = line.find(',', begin);
    std::string f = line.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\r')) f.pop_back();
    while (!f.empty() && f.front() == ' ') f.erase(f.begin());
    out.push_back(f);
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}

}  // namespace

CsvTable parse_csv_table(const std::string& text, const std::string& source) {
  CsvTable t;
  t.source = source;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    std::vector<std::string> f = split(line);
    if (t.header.empty()) {
      t.header = std::move(f);
      continue;
    }
    EMBER_CHECK(f.size() == t.header.size(), source, ":", lineno, ": expected ", t.header.size(),
                " comma-separated fields (as in the header), got ", f.size());
    t.rows.push_back(std::move(f));
    t.lines.push_back(lineno);
  }
  EMBER_CHECK(!t.header.empty(), source, ": empty file, expected a CSV header row");
  EMBER_CHECK(!t.rows.empty(), source, ": no rows after the header");
  return t;
}

CsvTable read_csv_table(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EMBER_CHECK(f, path, ": cannot open (expected a CSV file)");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_csv_table(ss.str(), path);
}

int CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  std::string have;
  for (const std::string& h : header) have += (have.empty() ? "" : ",") + h;
  EMBER_FAIL(source, ":1: no column '", name, "' (the header has ", have, ")");
}

const std::string& CsvTable::text(size_t i, int c) const {
  return rows.at(i).at(static_cast<size_t>(c));
}

double CsvTable::number(size_t i, int c, double min) const {
  const std::string& s = text(i, c);
  char* end = nullptr;
  const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  EMBER_CHECK(!s.empty() && end && *end == '\0' && std::isfinite(v) && v >= min, source, ":", lines[i], ": column '",
              header[static_cast<size_t>(c)], "': expected a finite number >= ", min, ", got '", s, "'");
  return v;
}

long CsvTable::integer(size_t i, int c, long min) const {
  const double v = number(i, c, static_cast<double>(min));
  EMBER_CHECK(v == std::floor(v) && v < 9e15, source, ":", lines[i], ": column '", header[static_cast<size_t>(c)],
              "': expected a whole number, got '", text(i, c), "'");
  return static_cast<long>(v);
}

}  // namespace ember::sched::elastic
