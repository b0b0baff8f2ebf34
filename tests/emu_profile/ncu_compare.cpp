// Nsight Compute's CSV, read and set beside the emulator's rows (ncu_compare.h).
#include "emu_profile/ncu_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "core/error.h"

namespace kernel_report {
namespace {

// The counters, by what they stand for.
constexpr const char* kGldReq = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
constexpr const char* kGldSec = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
constexpr const char* kCpReq = "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum";
constexpr const char* kCpSec = "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum";
constexpr const char* kGstReq = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
constexpr const char* kGstSec = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
constexpr const char* kSldReq = "smsp__inst_executed_op_shared_ld.sum";
constexpr const char* kSldWf = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum";
constexpr const char* kSstReq = "smsp__inst_executed_op_shared_st.sum";
constexpr const char* kSstWf = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum";
constexpr const char* kOccTheory = "sm__maximum_warps_per_active_cycle_pct";
constexpr const char* kOccAchieved = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr const char* kAll[] = {kGldReq, kGldSec, kCpReq,  kCpSec, kGstReq,    kGstSec,
                                kSldReq, kSldWf,  kSstReq, kSstWf, kOccTheory, kOccAchieved};

// Splits one CSV line: fields in double quotes (a doubled quote inside is a quote) or bare.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

double number(std::string v, const std::string& metric, long id) {
  std::string digits;
  for (char c : v)
    if (c != ',') digits += c;
  char* end = nullptr;
  const double x = digits.empty() ? NAN : std::strtod(digits.c_str(), &end);
  EMBER_CHECK(!digits.empty() && end && *end == 0 && std::isfinite(x), "ncu CSV: launch ", id, ", metric ", metric,
              ": value '", v, "' is not a number");
  return x;
}

// Sums (or, for percentages, averages) a metric over the launches of one kernel.
struct GpuTotals {
  std::map<std::string, double> sum;
  std::map<std::string, int> seen;
  std::string cc;
  void add(const NcuLaunch& l) {
    cc = l.cc;
    for (const auto& [k, v] : l.metrics) sum[k] += v, ++seen[k];
  }
  std::optional<double> total(const char* k) const {
    const auto it = sum.find(k);
    return it == sum.end() ? std::nullopt : std::optional<double>(it->second);
  }
  std::optional<double> mean(const char* k) const {
    const auto it = sum.find(k);
    return it == sum.end() ? std::nullopt : std::optional<double>(it->second / seen.at(k));
  }
  // a / b, with a and b each the sum of the listed metrics present (nullopt if none is, or b is 0).
  std::optional<double> ratio(std::initializer_list<const char*> a, std::initializer_list<const char*> b) const {
    double x = 0, y = 0;
    bool any = false;
    for (const char* k : a)
      if (auto v = total(k)) x += *v, any = true;
    for (const char* k : b)
      if (auto v = total(k)) y += *v;
    return any && y > 0 ? std::optional<double>(x / y) : std::nullopt;
  }
};

std::optional<double> per_request(uint64_t num, uint64_t requests) {
  return requests ? std::optional<double>(static_cast<double>(num) / static_cast<double>(requests)) : std::nullopt;
}

// The emulator's shared stores without cp.async's: on the GPU those are part of the LDGSTS
// instruction that ncu counts as a global load, not a shared store.
profile::SiteStats shared_stores_without_cp_async(const Row& r) {
  profile::SiteStats s;
  for (const profile::SiteStats& site : r.sites)
    if (site.space == profile::Space::Shared && site.store && site.location.find("cp_async.h") == std::string::npos)
      profile::add(s, site);
  return s;
}

Comparison compare_row(const Row& r, const GpuTotals& g) {
  Comparison c{r.case_name, r.kernel, {}, g.mean(kOccAchieved)};
  const profile::Totals& t = r.totals;
  const profile::SiteStats sst = shared_stores_without_cp_async(r);
  c.figures.push_back({"gld sectors/req", per_request(t.global_load.sectors, t.global_load.requests),
                       g.ratio({kGldSec, kCpSec}, {kGldReq, kCpReq})});
  c.figures.push_back(
      {"gst sectors/req", per_request(t.global_store.sectors, t.global_store.requests), g.ratio({kGstSec}, {kGstReq})});
  c.figures.push_back(
      {"smem ld wf/req", per_request(t.shared_load.wavefronts, t.shared_load.requests), g.ratio({kSldWf}, {kSldReq})});
  c.figures.push_back({"smem st wf/req", per_request(sst.wavefronts, sst.requests), g.ratio({kSstWf}, {kSstReq})});
  // The emulator's theoretical occupancy for the GPU's architecture (sm_80 for 8.x, else sm_90).
  const bool ampere = !g.cc.empty() && g.cc[0] == '8';
  const PtxasInfo& p = ampere ? r.sm80 : r.sm90;
  const Occupancy& o = ampere ? r.occ80 : r.occ90;
  c.figures.push_back(
      {"occupancy %", p.regs < 0 ? std::nullopt : std::optional<double>(100.0 * o.fraction), g.mean(kOccTheory)});
  return c;
}

std::string fmt(const std::optional<double>& v) {
  if (!v) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", *v);
  return b;
}

}  // namespace

std::string ncu_metrics() {
  std::string s;
  for (const char* k : kAll) s += (s.empty() ? "" : ",") + std::string(k);
  return s;
}

bool Figure::agrees() const {
  if (!compared()) return true;
  if (*ncu == 0) return *emu == 0;
  return std::abs(*emu - *ncu) <= 0.10 * std::abs(*ncu);
}

std::string base_name(std::string kernel) {
  const std::string anon = "(anonymous namespace)::";  // its '(' is not the parameter list's
  for (size_t p; (p = kernel.find(anon)) != std::string::npos;) kernel.erase(p, anon.size());
  std::string s;
  int depth = 0;
  for (char ch : kernel) {  // drop template arguments; stop at the parameter list
    if (ch == '<') ++depth;
    if (ch == '(' && depth == 0) break;
    if (depth == 0) s += ch;
    if (ch == '>') --depth;
  }
  const size_t colon = s.rfind("::"), space = s.rfind(' ');
  size_t from = 0;
  if (colon != std::string::npos) from = colon + 2;
  if (space != std::string::npos && space + 1 > from) from = space + 1;
  return s.substr(from);
}

std::vector<NcuLaunch> parse_ncu_csv(std::istream& in) {
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line))
    if (line.rfind("\"ID\",", 0) == 0) {
      header = csv_fields(line);
      break;
    }
  EMBER_CHECK(!header.empty(), "ncu CSV: no header line (\"ID\",...); expected the output of ncu --csv --metrics ...");
  auto column = [&](const char* name) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    EMBER_CHECK(false, "ncu CSV: no column '", name, "' in its header; expected ncu's default (details) page");
    return size_t{0};
  };
  const size_t id_c = column("ID"), kernel_c = column("Kernel Name"), cc_c = column("CC"),
               metric_c = column("Metric Name"), value_c = column("Metric Value");
  std::vector<NcuLaunch> out;
  std::map<long, size_t> index;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '"') continue;  // ==PROF== lines, the program's output
    const std::vector<std::string> f = csv_fields(line);
    EMBER_CHECK(f.size() == header.size(), "ncu CSV: a row with ", f.size(), " fields under a header of ",
                header.size(), ": ", line);
    char* end = nullptr;
    const long id = std::strtol(f[id_c].c_str(), &end, 10);
    EMBER_CHECK(!f[id_c].empty() && end && *end == 0, "ncu CSV: launch ID '", f[id_c], "' is not a number");
    auto [it, fresh] = index.emplace(id, out.size());
    if (fresh) out.push_back({id, f[kernel_c], f[cc_c], {}});
    NcuLaunch& l = out[it->second];
    l.metrics[f[metric_c]] = number(f[value_c], f[metric_c], id);
  }
  std::sort(out.begin(), out.end(), [](const NcuLaunch& a, const NcuLaunch& b) { return a.id < b.id; });
  return out;
}

ComparisonResult compare_with_ncu(const std::vector<std::vector<Row>>& cases, const std::vector<NcuLaunch>& ncu) {
  ComparisonResult res;
  size_t at = 0;  // the next ncu launch
  for (const std::vector<Row>& rows : cases) {
    if (rows.empty()) continue;
    // The case's launches in order: which row each belongs to.
    std::vector<const Row*> seq;
    for (const Row& r : rows)
      for (int p : r.positions) {
        if (seq.size() <= static_cast<size_t>(p)) seq.resize(p + 1);
        seq[p] = &r;
      }
    const std::string& name = rows.front().case_name;
    if (at + seq.size() > ncu.size()) {
      res.problems.push_back(name + ": the GPU run has " + std::to_string(ncu.size() - at) +
                             " launches left, the case " + std::to_string(seq.size()));
      return res;
    }
    std::map<const Row*, GpuTotals> gpu;
    for (size_t i = 0; i < seq.size(); ++i) {
      const NcuLaunch& l = ncu[at + i];
      if (!seq[i] || base_name(seq[i]->kernel) != base_name(l.kernel)) {
        res.problems.push_back(name + ": launch " + std::to_string(i) + " is " +
                               (seq[i] ? base_name(seq[i]->kernel) : std::string("?")) + " in the emulator and " +
                               base_name(l.kernel) + " on the GPU (ncu ID " + std::to_string(l.id) + ")");
        return res;
      }
      gpu[seq[i]].add(l);
    }
    at += seq.size();
    for (const Row& r : rows) res.rows.push_back(compare_row(r, gpu[&r]));
  }
  if (at != ncu.size())
    res.problems.push_back("the GPU run has " + std::to_string(ncu.size() - at) +
                           " more launches than the cases (another --cases filter?)");
  return res;
}

bool print_comparison(std::ostream& os, const ComparisonResult& r) {
  os << "| case | kernel |";
  const std::vector<Figure> none;
  const std::vector<Figure>& first = r.rows.empty() ? none : r.rows.front().figures;
  for (const Figure& f : first) os << " " << f.name << " emu / ncu |";
  os << " achieved occ % (ncu) | within 10% |\n|---|---|";
  for (size_t i = 0; i < first.size(); ++i) os << "---|";
  os << "---|---|\n";
  int compared = 0, agree = 0;
  for (const Comparison& c : r.rows) {
    os << "| " << c.case_name << " | " << c.kernel << " |";
    std::string off;
    for (const Figure& f : c.figures) {
      os << " " << fmt(f.emu) << " / " << fmt(f.ncu) << " |";
      compared += f.compared();
      agree += f.compared() && f.agrees();
      if (!f.agrees()) off += (off.empty() ? "" : ", ") + f.name;
    }
    os << " " << fmt(c.achieved_occupancy) << " | " << (off.empty() ? "yes" : "NO: " + off) << " |\n";
  }
  for (const std::string& p : r.problems) os << "not matched: " << p << "\n";
  os << "\nemulator vs ncu: " << agree << " of " << compared << " figures within 10%"
     << (r.problems.empty() ? "" : "; some launches not matched") << "\n";
  return agree == compared && r.problems.empty();
}

}  // namespace kernel_report
