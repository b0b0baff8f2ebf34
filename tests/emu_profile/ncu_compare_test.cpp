// The emulator-vs-Nsight-Compute comparison (ncu_compare.h) without a GPU: ncu's CSV as ncu writes
// it (preamble, quoted fields, thousands separators), the launches matched to the emulator's rows
// of real cases, a figure 20% off flagged, and launch sequences that do not match reported rather
// than guessed.
#include "emu_profile/ncu_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "core/error.h"

using namespace kernel_report;

namespace {

const char* kHeader =
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
    "\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";

std::string row(long id, const std::string& kernel, const std::string& metric, const std::string& value) {
  return "\"" + std::to_string(id) + "\",\"4242\",\"ember_kernel_report\",\"127.0.0.1\",\"" + kernel +
         "\",\"1\",\"7\",\"(256, 1, 1)\",\"(2, 2, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"" + metric +
         "\",\"\",\"" + value + "\"\n";
}

const Case& case_named(const std::vector<Case>& all, const std::string& name) {
  for (const Case& c : all)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

// What a GPU that behaved exactly as the emulator predicts would report: each launch of a row
// gets the row's totals divided by its launch count (the ratios are the same either way).
std::vector<NcuLaunch> ideal_gpu(const std::vector<std::vector<Row>>& cases) {
  std::vector<NcuLaunch> out;
  long id = 0;
  for (const std::vector<Row>& rows : cases) {
    std::vector<std::pair<int, const Row*>> seq;
    for (const Row& r : rows)
      for (int p : r.positions) seq.emplace_back(p, &r);
    std::sort(seq.begin(), seq.end());
    for (const auto& [p, r] : seq) {
      const double n = r->launches;
      const profile::Totals& t = r->totals;
      profile::SiteStats sst;
      for (const profile::SiteStats& s : r->sites)
        if (s.space == profile::Space::Shared && s.store && s.location.find("cp_async.h") == std::string::npos)
          profile::add(sst, s);
      NcuLaunch l{id++, "void ember::cuda::(anonymous namespace)::" + r->kernel + "(args)", "9.0", {}};
      l.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] = t.global_load.requests / n;
      l.metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] = t.global_load.sectors / n;
      l.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"] = t.global_store.requests / n;
      l.metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] = t.global_store.sectors / n;
      l.metrics["smsp__inst_executed_op_shared_ld.sum"] = t.shared_load.requests / n;
      l.metrics["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] = t.shared_load.wavefronts / n;
      l.metrics["smsp__inst_executed_op_shared_st.sum"] = sst.requests / n;
      l.metrics["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] = sst.wavefronts / n;
      if (r->sm90.regs >= 0) l.metrics["sm__maximum_warps_per_active_cycle_pct"] = 100.0 * r->occ90.fraction;
      l.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] = 20.0;
      out.push_back(l);
    }
  }
  return out;
}

std::vector<std::vector<Row>> profiled(std::initializer_list<const char*> names) {
  const std::vector<Case> all = representative_cases();
  const PtxasTable ptxas = load_ptxas(default_ptxas_dir());
  std::vector<std::vector<Row>> out;
  for (const char* n : names) out.push_back(run_case(case_named(all, n), ptxas));
  return out;
}

}  // namespace

TEST(NcuCompare, ReadsNcusCsvWithItsPreambleQuotesAndThousandsSeparators) {
  std::stringstream in;
  in << "==PROF== Connected to process 4242 (/bundle/bin/ember_kernel_report)\n"
     << "ran on cuda:0: mm f32 256x256x256\n"
     << kHeader << row(1, "softmax_rows", "smsp__inst_executed_op_shared_ld.sum", "12")
     << row(0, "void f<A, B>(P)", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "1,048,576")
     << row(0, "void f<A, B>(P)", "sm__warps_active.avg.pct_of_peak_sustained_active", "23.91")
     << "==PROF== Disconnected from process 4242\n";
  const std::vector<NcuLaunch> v = parse_ncu_csv(in);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].id, 0);  // sorted by ID, as the GPU ran them
  EXPECT_EQ(v[0].kernel, "void f<A, B>(P)");
  EXPECT_EQ(v[0].cc, "9.0");
  EXPECT_DOUBLE_EQ(v[0].metrics.at("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), 1048576.0);
  EXPECT_DOUBLE_EQ(v[0].metrics.at("sm__warps_active.avg.pct_of_peak_sustained_active"), 23.91);
  EXPECT_DOUBLE_EQ(v[1].metrics.at("smsp__inst_executed_op_shared_ld.sum"), 12.0);
  EXPECT_NE(ncu_metrics().find("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"), std::string::npos);
}

TEST(NcuCompare, OutputThatIsNotNcusCsvIsAnError) {
  auto error_of = [](const std::string& text) {
    std::stringstream in(text);
    try {
      parse_ncu_csv(in);
    } catch (const ember::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("==PROF== ERROR: no kernels were profiled\n").find("no header line"), std::string::npos);
  EXPECT_NE(error_of("\"ID\",\"Kernel Name\",\"Metric Value\"\n").find("no column 'CC'"), std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + row(0, "k", "m", "n/a")).find("value 'n/a' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kHeader) + "\"0\",\"1\"\n").find("a row with 2 fields"), std::string::npos);
}

TEST(NcuCompare, KernelsAreMatchedByTheirBaseName) {
  EXPECT_EQ(base_name("void ember::cuda::(anonymous namespace)::sgemm_warptile<ember::cuda::WarpTile<2, 4, 8>, "
                      "false, true>(ember::cuda::Params<float>)"),
            "sgemm_warptile");
  EXPECT_EQ(base_name("sgemm_warptile<WarpTile<2, 4, 8>, false, true>"), "sgemm_warptile");
  EXPECT_EQ(base_name("implicit_gemm"), "implicit_gemm");
  EXPECT_EQ(base_name("void ember::cuda::softmax_rows<float>(const float *, float *, long, long)"), "softmax_rows");
}

TEST(NcuCompare, AGpuThatCountsAsTheEmulatorAgreesAndAFigure20PercentOffDoesNot) {
  const auto cases = profiled({"mm f32 256x256x256 B^T", "conv2d 8x32x32x32, 64x3x3", "softmax rows 256x1024"});
  std::vector<NcuLaunch> gpu = ideal_gpu(cases);
  ComparisonResult r = compare_with_ncu(cases, gpu);
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  ASSERT_GE(r.rows.size(), 3u);
  int compared = 0;
  for (const Comparison& c : r.rows)
    for (const Figure& f : c.figures) {
      compared += f.compared();
      EXPECT_TRUE(f.agrees()) << c.kernel << " " << f.name;
    }
  EXPECT_GE(compared, 6);
  std::stringstream table;
  EXPECT_TRUE(print_comparison(table, r)) << table.str();
  EXPECT_NE(table.str().find("sgemm_warptile"), std::string::npos) << table.str();

  // The GEMM's shared loads take 20% more wavefronts on the "GPU": its row says so, and the verdict.
  for (NcuLaunch& l : gpu)
    if (base_name(l.kernel) == "sgemm_warptile")
      l.metrics["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] *= 1.2;
  r = compare_with_ncu(cases, gpu);
  std::stringstream bad;
  EXPECT_FALSE(print_comparison(bad, r));
  EXPECT_NE(bad.str().find("NO: smem ld wf/req"), std::string::npos) << bad.str();
}

TEST(NcuCompare, LaunchesThatCannotBeMatchedAreReportedNotGuessed) {
  const auto cases = profiled({"mm f32 256x256x256 B^T", "softmax rows 256x1024"});
  std::vector<NcuLaunch> gpu = ideal_gpu(cases);
  std::vector<NcuLaunch> renamed = gpu;
  renamed.back().kernel = "cublas_sgemm_kernel";  // the vendor's kernel ran instead
  ComparisonResult r = compare_with_ncu(cases, renamed);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("softmax rows 256x1024: launch 0 is softmax_rows in the emulator and "
                               "cublas_sgemm_kernel on the GPU"),
            std::string::npos)
      << r.problems[0];
  std::stringstream out;
  EXPECT_FALSE(print_comparison(out, r));

  gpu.pop_back();  // the GPU run stopped early
  r = compare_with_ncu(cases, gpu);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("launches left"), std::string::npos) << r.problems[0];

  std::vector<NcuLaunch> extra = ideal_gpu(cases);
  extra.push_back(extra.back());
  r = compare_with_ncu(cases, extra);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("has 1 more launches than the cases"), std::string::npos) << r.problems[0];
}
