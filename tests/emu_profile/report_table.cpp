// The report's table, its list of the worst instructions, and the budget check.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "emu_profile/kernel_report.h"

namespace kernel_report {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct(const profile::SiteStats& s) {
  return s.requests ? fmt("%.0f%%", 100.0 * profile::global_efficiency(s)) : "-";
}
std::string wavefronts(const profile::SiteStats& s) {
  return s.requests ? fmt("%.2f", profile::wavefronts_per_request(s)) : "-";
}
std::string occ(const Occupancy& o, const PtxasInfo& p) {
  return p.regs < 0 ? "n/a" : fmt("%.0f%%", 100.0 * o.fraction) + " (" + o.limiter + ")";
}
std::string regs(const Row& r) {
  if (r.sm80.regs < 0 && r.sm90.regs < 0) return "n/a";
  return std::to_string(r.sm80.regs) + "/" + std::to_string(r.sm90.regs);
}

profile::SiteStats shared_sum(const profile::Totals& t) {
  profile::SiteStats s = t.shared_load;
  profile::add(s, t.shared_store);
  return s;
}

profile::SiteStats global_sum(const profile::Totals& t) {
  profile::SiteStats s = t.global_load;
  profile::add(s, t.global_store);
  return s;
}

}  // namespace

void print_table(std::ostream& os, const std::vector<Row>& rows) {
  os << "| case | kernel | launches | block | blocks/launch | H100 fill | gld eff | gst eff | smem ld wf/req "
        "| smem st wf/req | smem excess | divergence | regs sm80/90 | spill B | occ sm_80 | occ sm_90 | HBM KiB "
        "| MFLOP | H100 us | H200 us |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const profile::Totals& t = r.totals;
    const double bytes = static_cast<double>(t.unique_global_bytes);
    const profile::SiteStats sh = shared_sum(t);
    double blocks = 0;
    for (uint64_t b : r.launch_blocks) blocks += static_cast<double>(b);
    const double fill = sm_fill(r, r.occ90, kH100);
    os << "| " << r.case_name << " | " << r.kernel << " | " << r.launches << " | " << r.block[0] << "x" << r.block[1]
       << "x" << r.block[2] << " | " << fmt("%.0f", r.launches ? blocks / r.launches : 0.0) << " | "
       << (fill < 0 ? std::string("n/a") : fmt("%.1f%%", 100.0 * fill)) << " | " << pct(t.global_load) << " | "
       << pct(t.global_store) << " | " << wavefronts(t.shared_load) << " | " << wavefronts(t.shared_store) << " | "
       << (sh.requests ? fmt("%.2f", profile::excess_wavefronts(sh)) : "-") << " | "
       << fmt("%.1f%%", 100.0 * profile::divergence(t)) << " | " << regs(r) << " | "
       << std::max(r.sm80.spill, r.sm90.spill) << " | " << occ(r.occ80, r.sm80) << " | " << occ(r.occ90, r.sm90)
       << " | " << fmt("%.1f", bytes / 1024) << " | " << fmt("%.2f", r.flops / 1e6) << " | "
       << fmt("%.2f", 1e6 * roofline_seconds(kH100, bytes, r.flops, r.fp64)) << " | "
       << fmt("%.2f", 1e6 * roofline_seconds(kH200, bytes, r.flops, r.fp64)) << " |\n";
  }
}

void print_sites(std::ostream& os, const Row& r) {
  for (const auto& s : r.sites) {
    const bool g = s.space == profile::Space::Global;
    os << "  " << r.kernel << ": " << (g ? "global " : "shared ") << (s.store ? "store" : "load") << " at "
       << s.location << ": " << s.requests << " requests, " << s.lanes << " lanes, " << s.bytes << " bytes, "
       << (g ? std::to_string(s.sectors) + " sectors" : std::to_string(s.wavefronts) + " wavefronts") << ", "
       << s.partial << " partial\n";
  }
}

void print_worst_sites(std::ostream& os, const std::vector<Row>& rows, size_t per_row) {
  for (const Row& r : rows) {
    std::vector<profile::SiteStats> bad;
    for (const profile::SiteStats& s : r.sites) {
      const bool global_bad = s.space == profile::Space::Global && profile::global_efficiency(s) < 0.9;
      const bool shared_bad = s.space == profile::Space::Shared && profile::excess_wavefronts(s) > 1.1;
      if (global_bad || shared_bad) bad.push_back(s);
    }
    // The most sectors (or wavefronts) wasted first.
    auto waste = [](const profile::SiteStats& s) {
      return s.space == profile::Space::Global ? s.sectors - s.sectors_needed : s.wavefronts - s.ideal_wavefronts;
    };
    std::sort(bad.begin(), bad.end(), [&](const auto& a, const auto& b) { return waste(a) > waste(b); });
    if (bad.size() > per_row) bad.resize(per_row);
    for (const auto& s : bad) {
      const bool g = s.space == profile::Space::Global;
      os << "  " << r.case_name << " / " << r.kernel << ": " << (g ? "global " : "shared ")
         << (s.store ? "store" : "load") << " at " << s.location << ": " << s.requests << " requests, "
         << (g ? fmt("%.0f%% sector efficiency", 100.0 * profile::global_efficiency(s))
               : fmt("%.2f wavefronts per ideal", profile::excess_wavefronts(s)))
         << "\n";
    }
  }
}

std::vector<std::string> check(const Row& r, const Budget& b) {
  std::vector<std::string> v;
  const std::string who = r.case_name + " / " + r.kernel + " (" + b.family + "): ";
  const profile::SiteStats g = global_sum(r.totals), sh = shared_sum(r.totals);
  if (g.requests == 0 && sh.requests == 0)
    v.push_back(who + "no memory access was counted (is the kernel compiled with the access hooks?)");
  if (g.requests && profile::global_efficiency(g) < b.min_global_efficiency)
    v.push_back(who + fmt("global efficiency %.1f%%", 100 * profile::global_efficiency(g)) +
                fmt(" < %.0f%%", 100 * b.min_global_efficiency));
  if (sh.requests && profile::excess_wavefronts(sh) > b.max_shared_excess)
    v.push_back(who + fmt("%.2f shared wavefronts per ideal wavefront", profile::excess_wavefronts(sh)) +
                fmt(" > %.2f", b.max_shared_excess));
  for (const auto& [arch, p, o] : {std::tuple{"sm_80", r.sm80, r.occ80}, std::tuple{"sm_90", r.sm90, r.occ90}}) {
    if (p.regs < 0) continue;  // no ptxas data in this build
    if (o.fraction + 1e-9 < b.min_occupancy)
      v.push_back(who + arch + fmt(" occupancy %.1f%%", 100 * o.fraction) + fmt(" < %.1f%%", 100 * b.min_occupancy));
    if (p.spill > b.max_spill_bytes) v.push_back(who + arch + " spills " + std::to_string(p.spill) + " bytes");
  }
  return v;
}

}  // namespace kernel_report
