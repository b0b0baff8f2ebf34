// The emulator's predictions against Nsight Compute's counters for the same kernels and shapes
// (docs/cuda/kernel-report.md, "Against the hardware"). scripts/gpu-check.sh runs the report's
// cases on a lent GPU under ncu (ember_kernel_report --on-gpu, the metrics of ncu_metrics()) and
// keeps ncu's CSV; ember_kernel_report --compare-ncu CSV runs the same cases in the emulator and
// sets each kernel's figures side by side:
//   global load and store sectors per request (ncu's loads include cp.async's LDGSTS, which the
//   emulator runs as a load and a shared store: that store is left out of its shared stores);
//   shared load and store wavefronts per request; theoretical occupancy (the emulator's from
//   ptxas, for the GPU's architecture), with ncu's achieved occupancy beside it.
// A figure agrees when it is within 10% of ncu's (issue 50's target).
#pragma once

#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "emu_profile/kernel_report.h"

namespace kernel_report {

// The metrics to ask ncu for, comma-separated (ncu --metrics).
std::string ncu_metrics();

// One profiled launch of ncu's CSV (the default "details" page in --csv form: a row per launch
// and metric). Values are as ncu printed them, thousands separators removed.
struct NcuLaunch {
  long id = 0;
  std::string kernel;  // as ncu names it (demangled, or the bare function name)
  std::string cc;      // compute capability, "9.0"
  std::map<std::string, double> metrics;
};
// Reads ncu's output: lines before the CSV header (==PROF== lines, the program's own) and
// non-CSV lines after it are skipped. An ember::Error when there is no header, when a column the
// comparison needs is missing, or when a value is not a number.
std::vector<NcuLaunch> parse_ncu_csv(std::istream& in);

// A kernel's name without its namespace, template arguments and parameters: "sgemm_warptile".
std::string base_name(std::string kernel);

// One kernel of one case, side by side. Each figure is the emulator's and ncu's; nullopt where a
// side has nothing to say (no such accesses, no ptxas data, a metric ncu did not report).
struct Figure {
  std::string name;  // "gld sectors/req", ...
  std::optional<double> emu, ncu;
  bool compared() const { return emu && ncu; }
  bool agrees() const;  // within 10% of ncu's, or not compared
};
struct Comparison {
  std::string case_name, kernel;
  std::vector<Figure> figures;
  std::optional<double> achieved_occupancy;  // ncu's, percent
};
struct ComparisonResult {
  std::vector<Comparison> rows;
  std::vector<std::string> problems;  // cases whose launches could not be matched, and why
};
// Matches ncu's launches (in the order the GPU ran them) to the emulator's rows: case by case,
// each case's launches in order, the kernels' base names checked at every launch. A case whose
// sequence differs is reported in `problems` and the comparison stops there (the launches after it
// cannot be placed).
ComparisonResult compare_with_ncu(const std::vector<std::vector<Row>>& cases, const std::vector<NcuLaunch>& ncu);

// The table, then a line per problem and the verdict; returns whether every figure compared agrees
// and every case was matched.
bool print_comparison(std::ostream& os, const ComparisonResult& r);

}  // namespace kernel_report
