// ember_kernel_report: the emulator's efficiency table for the CUDA kernels on representative
// shapes (docs/cuda/kernel-report.md), the instructions that miss the budgets, each family's
// budget verdict, and the kernels ptxas compiled that no case reached.
//
//   ember_kernel_report [--ptxas DIR] [--cases SUBSTRING] [--sites]
//   ember_kernel_report --on-gpu [--cases SUBSTRING]       the cases on cuda:0, for ncu to profile
//   ember_kernel_report --compare-ncu CSV [--ptxas DIR] [--cases SUBSTRING]
//   ember_kernel_report --ncu-metrics                      the metrics ncu must collect
//
// DIR holds a CUDA build's *.ptxas.log files (default: this build's); without them registers,
// spills and occupancy read n/a. Every number is a prediction of the emulator, not a measurement;
// --compare-ncu sets them beside Nsight Compute's counters from a GPU (ncu_compare.h) and exits 1
// when a figure is more than 10% off or a launch cannot be matched.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

#include "core/cuda/gemm_tuning.h"
#include "core/device.h"
#include "core/error.h"
#include "core/kernel_choice.h"
#include "core/stream.h"
#include "emu_profile/kernel_report.h"
#include "emu_profile/ncu_compare.h"

using namespace kernel_report;

namespace {

// Each family's verdict on the rows its kernels reached: a breach a waiver accepts (budgets.cpp) is
// printed as waived and does not fail it, as in the budget test.
void print_budgets(const std::vector<Row>& rows) {
  std::cout << "\nBudgets:\n";
  for (const Budget& b : budgets()) {
    int n = 0;
    std::vector<std::string> bad, waived;
    for (const Row& r : rows) {
      if (r.kernel.find(b.kernel) == std::string::npos) continue;
      ++n;
      for (std::string& s : check(r, b)) {
        const Waiver* w = waiver_for(r, s);
        if (w)
          waived.push_back(s + " (waived: " + w->why + ")");
        else
          bad.push_back(std::move(s));
      }
    }
    std::cout << "  " << b.family << ": "
              << (n == 0        ? "no kernel reached"
                  : bad.empty() ? "pass"
                                : "FAIL")
              << " (" << n << " rows" << (waived.empty() ? "" : ", " + std::to_string(waived.size()) + " waived")
              << ")\n";
    for (const std::string& s : bad) std::cout << "    " << s << "\n";
    for (const std::string& s : waived) std::cout << "    " << s << "\n";
  }
}

// The kernels ptxas compiled (base names: namespaces, anonymous ones included, template arguments
// and parameters dropped) that no case launched.
void print_unreached(const PtxasTable& ptxas, const std::vector<Row>& rows) {
  if (ptxas.empty()) return;
  std::set<std::string> reached, all;
  for (const Row& r : rows) reached.insert(base_name(r.kernel));
  for (const auto& [name, archs] : ptxas)
    if (!reached.count(base_name(name))) all.insert(base_name(name));
  std::cout << "\nKernels ptxas compiled that no case reached (" << all.size() << "):";
  for (const std::string& s : all) std::cout << " " << s;
  std::cout << "\n";
}

constexpr const char* kUsage =
    "usage: ember_kernel_report [--ptxas DIR] [--cases SUBSTRING] [--sites]\n"
    "       ember_kernel_report --targets [--ptxas DIR]\n"
    "       ember_kernel_report --on-gpu [--cases SUBSTRING]\n"
    "       ember_kernel_report --compare-ncu CSV [--ptxas DIR] [--cases SUBSTRING]\n"
    "       ember_kernel_report --ncu-metrics\n";

std::vector<Case> selected_cases(const std::string& only) {
  std::vector<Case> v;
  for (Case& c : representative_cases())
    if (only.empty() || c.name.find(only) != std::string::npos) v.push_back(std::move(c));
  return v;
}

// Each case once on cuda:0 with the native kernels (the emulator has no vendor side), in order,
// for Nsight Compute; nothing on stdout, where ncu writes its CSV.
int run_on_gpu(const std::string& only) {
  if (ember::cuda_device_count() == 0) {
    std::cerr << "ember_kernel_report --on-gpu: no CUDA device\n";
    return 1;
  }
  for (int f = 0; f < ember::kNumKernelFamilies; ++f)
    ember::set_kernel_choice(static_cast<ember::KernelFamily>(f), ember::KernelChoice::Native);
  // The emulator takes the default GEMM tile (it stands for no architecture): so does this run,
  // whatever a tuned table would pick on this GPU.
  setenv("EMBER_GEMM_TILE", std::string(ember::cuda::gemm_tile_name(ember::cuda::kDefaultGemmTile)).c_str(), 1);
  const ember::Device gpu = ember::Device::cuda(0);
  for (const Case& c : selected_cases(only)) {
    std::function<void()> run = c.make(gpu);
    ember::get_stream(gpu).synchronize();
    run();
    ember::get_stream(gpu).synchronize();
    std::cerr << "ran on cuda:0: " << c.name << "\n";
  }
  return 0;
}

// Issue 50's targets, each call run dry on the emulator (tests/emu_profile/targets.cpp).
int print_predictions(const PtxasTable& ptxas) {
  const std::vector<Target> targets = issue50_targets();
  std::vector<Prediction> p;
  for (const Target& t : targets) p.push_back(predict(t, ptxas));
  print_targets(std::cout, p);
  return 0;
}

int compare_ncu(const std::string& csv, const std::string& dir, const std::string& only) {
  std::ifstream in(csv);
  EMBER_CHECK(in.good(), "ember_kernel_report: cannot read the ncu CSV '", csv, "'");
  const std::vector<NcuLaunch> ncu = parse_ncu_csv(in);
  const PtxasTable ptxas = load_ptxas(dir);
  std::vector<std::vector<Row>> cases;
  for (const Case& c : selected_cases(only)) cases.push_back(run_case(c, ptxas));
  std::cout << "The emulator's predictions (ptxas: " << (ptxas.empty() ? "none" : dir) << ") against Nsight Compute ("
            << csv << ", " << ncu.size() << " launches" << (ncu.empty() ? "" : ", compute capability " + ncu[0].cc)
            << "):\n\n";
  return print_comparison(std::cout, compare_with_ncu(cases, ncu)) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = default_ptxas_dir(), only, csv;
  bool sites = false, on_gpu = false, targets_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ptxas") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--sites")) {
      sites = true;
    } else if (!std::strcmp(argv[i], "--cases") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--on-gpu")) {
      on_gpu = true;
    } else if (!std::strcmp(argv[i], "--targets")) {
      targets_only = true;
    } else if (!std::strcmp(argv[i], "--compare-ncu") && i + 1 < argc) {
      csv = argv[++i];
    } else if (!std::strcmp(argv[i], "--ncu-metrics") && argc == 2) {
      std::cout << ncu_metrics() << "\n";
      return 0;
    } else {
      std::cerr << kUsage;
      return 2;
    }
  }
  if ((on_gpu && !csv.empty()) || (targets_only && (on_gpu || !csv.empty() || !only.empty()))) {
    std::cerr << kUsage;
    return 2;
  }
  try {
    if (on_gpu) return run_on_gpu(only);
    if (!csv.empty()) return compare_ncu(csv, dir, only);
  } catch (const ember::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  const PtxasTable ptxas = load_ptxas(dir);
  if (targets_only) return print_predictions(ptxas);
  std::vector<Row> rows;
  for (const Case& c : selected_cases(only))
    for (Row& r : run_case(c, ptxas)) rows.push_back(std::move(r));
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
  if (only.empty()) print_predictions(ptxas);
  return 0;
}
