// ember_kernel_report: the emulator's efficiency table for the CUDA kernels on representative
// shapes (docs/cuda/kernel-report.md), the instructions that miss the budgets, each family's
// budget verdict, and the kernels ptxas compiled that no case reached.
//
//   ember_kernel_report [--ptxas DIR] [--cases SUBSTRING] [--sites]
//
// DIR holds a CUDA build's *.ptxas.log files (default: this build's); without them registers,
// spills and occupancy read n/a. Every number is a prediction of the emulator, not a measurement.
#include <cstring>
#include <iostream>
#include <set>

#include "emu_profile/kernel_report.h"

using namespace kernel_report;

namespace {

void print_budgets(const std::vector<Row>& rows) {
  std::cout << "\nBudgets:\n";
  for (const Budget& b : budgets()) {
    int n = 0;
    std::vector<std::string> bad;
    for (const Row& r : rows) {
      if (r.kernel.find(b.kernel) == std::string::npos) continue;
      ++n;
      for (std::string& s : check(r, b)) bad.push_back(std::move(s));
    }
    std::cout << "  " << b.family << ": "
              << (n == 0        ? "no kernel reached"
                  : bad.empty() ? "pass"
                                : "FAIL")
              << " (" << n << " rows)\n";
    for (const std::string& s : bad) std::cout << "    " << s << "\n";
  }
}

void print_unreached(const PtxasTable& ptxas, const std::vector<Row>& rows) {
  std::set<std::string> reached, all;
  for (const Row& r : rows) reached.insert(r.kernel.substr(0, r.kernel.find('<')));
  for (const auto& [name, archs] : ptxas) {
    std::string s = name.substr(0, name.find('('));
    s = s.substr(0, s.find('<'));
    s = s.substr(s.rfind("::") == std::string::npos ? 0 : s.rfind("::") + 2);
    if (!reached.count(s)) all.insert(s);
  }
  if (ptxas.empty()) return;
  std::cout << "\nKernels ptxas compiled that no case reached (" << all.size() << "):";
  for (const std::string& s : all) std::cout << " " << s;
  std::cout << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = default_ptxas_dir(), only;
  bool sites = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ptxas") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--sites")) {
      sites = true;
    } else if (!std::strcmp(argv[i], "--cases") && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::cerr << "usage: ember_kernel_report [--ptxas DIR] [--cases SUBSTRING] [--sites]\n";
      return 2;
    }
  }
  const PtxasTable ptxas = load_ptxas(dir);
  std::vector<Row> rows;
  for (const Case& c : representative_cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    for (Row& r : run_case(c, ptxas)) rows.push_back(std::move(r));
  }
  std::cout << "Kernel efficiency predicted by the emulator (" << (ptxas.empty() ? "no ptxas data" : dir)
            << "); roofline bounds on H100/H200 SXM.\n\n";
  print_table(std::cout, rows);
  std::cout << "\nInstructions below budget (global < 90% sector efficiency, shared > 1.1 wavefronts per ideal):\n";
  print_worst_sites(std::cout, rows, 3);
  if (sites) {
    std::cout << "\nEvery instruction:\n";
    for (const Row& r : rows) print_sites(std::cout, r);
  }
  print_budgets(rows);
  print_unreached(ptxas, rows);
  return 0;
}
