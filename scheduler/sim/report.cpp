#include "scheduler/sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "scheduler/sim/fairness.h"

namespace ember::sched {
namespace {

struct Column {
  const char* key;     // JSON/CSV key
  const char* header;  // table header
  double Metrics::*field;
};

const std::vector<Column>& columns() {
  static const std::vector<Column> c = {
      {"avg_jct", "avg JCT s", &Metrics::avg_jct},
      {"p50_jct", "p50 JCT s", &Metrics::p50_jct},
      {"p99_jct", "p99 JCT s", &Metrics::p99_jct},
      {"makespan", "makespan s", &Metrics::makespan},
      {"busy_fraction", "busy", &Metrics::busy_fraction},
      {"avg_queue_delay", "avg queue s", &Metrics::avg_queue_delay},
      {"preemptions_per_job", "preempt/job", &Metrics::preemptions_per_job},
      {"max_slowdown", "max slowdown", &Metrics::max_slowdown},
  };
  return c;
}

std::string num(double v) {
  char buf[64];
  double a = std::abs(v);
  if (v == 0)
    std::snprintf(buf, sizeof buf, "0");
  else if (a >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 10)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// Shortest round-tripping form for JSON/CSV.
std::string exact(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  double back = std::strtod(buf, nullptr);
  for (int prec = 6; prec < 17; ++prec) {
    char b2[64];
    std::snprintf(b2, sizeof b2, "%.*g", prec, v);
    if (std::strtod(b2, nullptr) == back) return b2;
  }
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::string pad(const std::string& s, size_t w, bool left = false) {
  if (s.size() >= w) return s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

// Rows as columns two spaces apart, each as wide as its widest cell; the first `text_columns`
// left-aligned, the rest (numbers) right-aligned.
std::string aligned(const std::vector<std::vector<std::string>>& rows, size_t text_columns) {
  std::vector<size_t> w;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], row[i].size());
    }
  std::string o;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) o += (i ? "  " : "") + pad(row[i], w[i], i < text_columns);
    o += "\n";
  }
  return o;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else
      o += c;
  }
  return o + "\"";
}

std::string format_summary(const SimResult& r) {
  std::ostringstream o;
  o << "policy " << r.policy << " (knows " << (r.knows.empty() ? "-" : r.knows) << ") on " << r.gpus << " devices, "
    << r.jobs.size() << " jobs, preemption cost " << num(r.preempt_cost) << " s\n";
  const Metrics& m = r.metrics;
  o << "  avg JCT          " << num(m.avg_jct) << " s (" << num(m.avg_jct / 3600) << " h)\n"
    << "  p50 JCT          " << num(m.p50_jct) << " s\n"
    << "  p99 JCT          " << num(m.p99_jct) << " s\n"
    << "  makespan         " << num(m.makespan) << " s\n"
    << "  busy fraction    " << num(m.busy_fraction) << " (during the arrival window)\n"
    << "  avg queue delay  " << num(m.avg_queue_delay) << " s\n"
    << "  preemptions/job  " << num(m.preemptions_per_job) << "\n"
    << "  max slowdown     " << num(m.max_slowdown) << "\n";
  if (r.prediction_error >= 0)
    o << "  prediction error " << num(r.prediction_error) << " (median |log(predicted / true duration)|)\n";
  o << "  simulated in     " << num(r.wall_seconds) << " s wall, " << num(r.cpu_seconds) << " s CPU (" << r.decisions
    << " decisions)\n";
  for (const auto& [k, v] : r.counters) o << "  " << pad(k, 16, true) << " " << num(v) << "\n";
  if (r.admission) {
    const AdmissionStats& a = *r.admission;
    o << "  admission        target " << num(a.target) << " s: " << a.admitted << " admitted ("
      << num(a.fraction_admitted) << "), " << a.refused << " refused, " << a.deferrals << " deferral(s); "
      << num(a.slo_attainment) << " of the admitted started within the target\n"
      << "  start estimates  look-ahead |error| / actual p50 " << num(a.error_median) << ", p90 " << num(a.error_p90)
      << " (median " << num(a.abs_error_median) << " s); M/G/c p50 " << num(a.queueing_error_median) << ", p90 "
      << num(a.queueing_error_p90) << "\n"
      << "  delayed jobs     " << a.delayed << " waited a minute or more: look-ahead error p50 "
      << num(a.delayed_error_median) << ", p90 " << num(a.delayed_error_p90) << "\n";
  }
  if (r.fairness) {
    const Fairness& f = *r.fairness;
    o << "  team rho         max " << num(f.max_rho) << ", min " << num(f.min_rho) << ", Jain " << num(f.jain)
      << " (avg JCT shared / alone on the team's share)\n"
      << "  job rho          p50 " << num(f.job_rho_p50) << ", p90 " << num(f.job_rho_p90) << ", max "
      << num(f.job_rho_max) << "\n";
    if (f.under_share_teams > 0)
      o << "  under-share rho  max " << num(f.under_share_max_rho) << " over the " << f.under_share_teams
        << " team(s) whose demand is below their share\n";
    o << format_teams({r});
  }
  return o.str();
}

std::string format_table(const std::vector<SimResult>& rs, int baseline, int yardstick) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"policy", "knows"};
  for (const Column& c : columns()) head.push_back(c.header);
  const std::string ys = yardstick >= 0 ? rs[yardstick].policy : "";
  if (yardstick >= 0) head.insert(head.end(), {"avg/" + ys, "p99/" + ys});
  bool fair = false;
  for (const SimResult& r : rs) fair = fair || r.fairness;
  if (fair) head.insert(head.end(), {"max rho", "under-share rho", "Jain"});
  bool admitting = false;
  for (const SimResult& r : rs) admitting = admitting || r.admission;
  if (admitting)
    head.insert(head.end(), {"admitted", "SLO met", "est err p50", "est err p90", "delayed err p50", "M/G/c err p50"});
  head.push_back("pred err");
  head.push_back("sim CPU s");
  rows.push_back(head);
  for (const SimResult& r : rs) {
    std::vector<std::string> row = {r.policy, r.knows.empty() ? "-" : r.knows};
    for (const Column& c : columns()) {
      double v = r.metrics.*c.field;
      std::string cell = num(v);
      if (baseline >= 0) {
        double b = rs[baseline].metrics.*c.field;
        cell += b != 0 ? " (" + num(v / b) + ")" : " (-)";
      }
      row.push_back(cell);
    }
    if (yardstick >= 0) {
      const Metrics& y = rs[yardstick].metrics;
      row.push_back(y.avg_jct > 0 ? num(r.metrics.avg_jct / y.avg_jct) : "-");
      row.push_back(y.p99_jct > 0 ? num(r.metrics.p99_jct / y.p99_jct) : "-");
    }
    if (fair) {
      row.push_back(r.fairness ? num(r.fairness->max_rho) : "-");
      row.push_back(r.fairness && r.fairness->under_share_teams > 0 ? num(r.fairness->under_share_max_rho) : "-");
      row.push_back(r.fairness ? num(r.fairness->jain) : "-");
    }
    if (admitting) {
      const std::optional<AdmissionStats>& a = r.admission;
      row.push_back(a ? num(a->fraction_admitted) : "-");
      row.push_back(a ? num(a->slo_attainment) : "-");
      row.push_back(a ? num(a->error_median) : "-");
      row.push_back(a ? num(a->error_p90) : "-");
      row.push_back(a ? num(a->delayed_error_median) : "-");
      row.push_back(a ? num(a->queueing_error_median) : "-");
    }
    row.push_back(r.prediction_error >= 0 ? num(r.prediction_error) : "-");
    row.push_back(num(r.cpu_seconds));
    rows.push_back(row);
  }
  std::ostringstream o;
  o << aligned(rows, 2);
  if (baseline >= 0) o << "(ratio to " << rs[baseline].policy << " in parentheses)\n";
  bool predicted = false;
  for (const SimResult& r : rs) predicted = predicted || r.prediction_error >= 0;
  if (predicted) o << "(pred err: median |log(predicted / true duration)| over the jobs; 0.69 is a factor of 2)\n";
  if (admitting)
    o << "(admission: target start delay " << num(rs.front().admission ? rs.front().admission->target : 0)
      << " s; est err: |estimate - actual start delay| / max(actual, 60 s) of the admitted jobs, look-ahead; M/G/c: "
         "the queueing formula's)\n";
  if (fair)
    o << "(rho: a team's average JCT over its average JCT alone on its guaranteed share; under-share rho: the "
         "largest over the teams whose demand is below their share; Jain's index over the teams' rho)\n";
  return o.str();
}

std::string format_teams(const std::vector<SimResult>& rs) {
  const Fairness* first = nullptr;
  for (const SimResult& r : rs)
    if (r.fairness && !first) first = r.fairness.get();
  if (!first) return "";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"team", "share", "demand", "jobs", "alone JCT s"};
  for (const SimResult& r : rs)
    if (r.fairness) head.push_back("rho " + r.policy);
  rows.push_back(head);
  for (size_t t = 0; t < first->teams.size(); ++t) {
    const TeamFairness& tf = first->teams[t];
    std::vector<std::string> row = {tf.team, std::to_string(tf.share), num(tf.demand), std::to_string(tf.jobs),
                                    num(tf.alone_avg_jct)};
    for (const SimResult& r : rs)
      if (r.fairness) row.push_back(t < r.fairness->teams.size() ? num(r.fairness->teams[t].rho) : "-");
    rows.push_back(row);
  }
  std::ostringstream o;
  o << aligned(rows, 1);
  o << "(alone JCT: the team's jobs alone on its share, or on its widest gang when that is wider, under the first "
       "row's policy)\n";
  return o.str();
}

std::string to_json(const std::vector<SimResult>& rs) {
  std::ostringstream o;
  o << "[\n";
  for (size_t i = 0; i < rs.size(); ++i) {
    const SimResult& r = rs[i];
    o << "  {\"policy\": " << json_string(r.policy)
      << ", \"clairvoyant\": " << (r.traits.clairvoyant ? "true" : "false")
      << ", \"preemptive\": " << (r.traits.preemptive ? "true" : "false") << ", \"knows\": " << json_string(r.knows)
      << ", \"prediction_error\": " << (r.prediction_error >= 0 ? exact(r.prediction_error) : "null")
      << ", \"gpus\": " << r.gpus << ", \"jobs\": " << r.jobs.size() << ", \"preempt_cost\": " << exact(r.preempt_cost);
    for (const Column& c : columns()) o << ", \"" << c.key << "\": " << exact(r.metrics.*c.field);
    o << ", \"decisions\": " << r.decisions << ", \"sim_seconds\": " << exact(r.wall_seconds)
      << ", \"sim_cpu_seconds\": " << exact(r.cpu_seconds);
    o << ", \"counters\": {";
    bool first = true;
    for (const auto& [k, v] : r.counters) {
      o << (first ? "" : ", ") << json_string(k) << ": " << exact(v);
      first = false;
    }
    o << "}";
    if (r.admission) {
      const AdmissionStats& a = *r.admission;
      o << ", \"admission\": {\"target\": " << exact(a.target) << ", \"admitted\": " << a.admitted
        << ", \"refused\": " << a.refused << ", \"deferrals\": " << a.deferrals
        << ", \"fraction_admitted\": " << exact(a.fraction_admitted)
        << ", \"slo_attainment\": " << exact(a.slo_attainment) << ", \"error_median\": " << exact(a.error_median)
        << ", \"error_p90\": " << exact(a.error_p90) << ", \"delayed\": " << a.delayed
        << ", \"delayed_error_median\": " << exact(a.delayed_error_median)
        << ", \"delayed_error_p90\": " << exact(a.delayed_error_p90)
        << ", \"queueing_error_median\": " << exact(a.queueing_error_median)
        << ", \"queueing_error_p90\": " << exact(a.queueing_error_p90)
        << ", \"abs_error_median\": " << exact(a.abs_error_median) << "}";
    }
    if (r.fairness) {
      const Fairness& f = *r.fairness;
      o << ", \"fairness\": {\"max_rho\": " << exact(f.max_rho) << ", \"min_rho\": " << exact(f.min_rho)
        << ", \"jain\": " << exact(f.jain) << ", \"job_rho_p50\": " << exact(f.job_rho_p50)
        << ", \"job_rho_p90\": " << exact(f.job_rho_p90) << ", \"job_rho_max\": " << exact(f.job_rho_max)
        << ", \"under_share_teams\": " << f.under_share_teams
        << ", \"under_share_max_rho\": " << exact(f.under_share_max_rho) << ", \"teams\": [";
      for (size_t k = 0; k < f.teams.size(); ++k) {
        const TeamFairness& t = f.teams[k];
        o << (k ? ", " : "") << "{\"team\": " << json_string(t.team) << ", \"share\": " << t.share
          << ", \"alone_gpus\": " << t.alone_gpus << ", \"demand\": " << exact(t.demand) << ", \"jobs\": " << t.jobs
          << ", \"avg_jct\": " << exact(t.avg_jct) << ", \"avg_slowdown\": " << exact(t.avg_slowdown)
          << ", \"alone_avg_jct\": " << exact(t.alone_avg_jct) << ", \"rho\": " << exact(t.rho) << "}";
      }
      o << "]}";
    }
    o << "}" << (i + 1 < rs.size() ? "," : "") << "\n";
  }
  o << "]\n";
  return o.str();
}

std::string to_csv(const std::vector<SimResult>& rs) {
  std::ostringstream o;
  o << "policy,clairvoyant,preemptive,gpus,jobs,preempt_cost";
  for (const Column& c : columns()) o << "," << c.key;
  o << ",decisions,sim_seconds,sim_cpu_seconds,knows,prediction_error,max_rho,jain\n";
  for (const SimResult& r : rs) {
    o << r.policy << "," << (r.traits.clairvoyant ? "true" : "false") << "," << (r.traits.preemptive ? "true" : "false")
      << "," << r.gpus << "," << r.jobs.size() << "," << exact(r.preempt_cost);
    for (const Column& c : columns()) o << "," << exact(r.metrics.*c.field);
    o << "," << r.decisions << "," << exact(r.wall_seconds) << "," << exact(r.cpu_seconds) << "," << r.knows << ","
      << (r.prediction_error >= 0 ? exact(r.prediction_error) : "") << ","
      << (r.fairness ? exact(r.fairness->max_rho) : "") << "," << (r.fairness ? exact(r.fairness->jain) : "") << "\n";
  }
  return o.str();
}

namespace {

const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// The CDF panel's geometry: its box and the log time axis from 10^d0 to 10^d1 seconds.
struct SvgFrame {
  double W = 760, H0 = 480, left = 70, right = 170, top = 40, bottom = 50;
  double pw = 0, ph = 0, d0 = 0, d1 = 1;
  double X(double v) const { return left + (std::log10(std::max(v, 1.0)) - d0) / (d1 - d0) * pw; }
  double Y(double f) const { return top + (1 - f) * ph; }
};

SvgFrame svg_frame(const std::vector<SimResult>& rs) {
  SvgFrame fr;
  fr.pw = fr.W - fr.left - fr.right;
  fr.ph = fr.H0 - fr.top - fr.bottom;
  double lo = kInf, hi = 0;
  for (const SimResult& r : rs)
    for (const JobResult& j : r.jobs) {
      if (j.refused) continue;
      double x = std::max(j.jct(), 1.0);
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
  if (!(lo < kInf)) lo = 1, hi = 10;
  fr.d0 = std::floor(std::log10(lo)), fr.d1 = std::ceil(std::log10(hi));
  if (fr.d1 <= fr.d0) fr.d1 = fr.d0 + 1;
  return fr;
}

// The grid, the decade and fraction labels, the box and the axis titles.
void svg_axes(std::ostringstream& o, const SvgFrame& fr) {
  const double left = fr.left, top = fr.top, pw = fr.pw, ph = fr.ph;
  for (int dec = static_cast<int>(fr.d0); dec <= static_cast<int>(fr.d1); ++dec) {
    double x = fr.X(std::pow(10.0, dec));
    o << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\"" << top + ph
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << x << "\" y=\"" << top + ph + 16 << "\" text-anchor=\"middle\">1e" << dec
      << "</text>\n";
  }
  for (int k = 0; k <= 4; ++k) {
    double y = fr.Y(k / 4.0);
    o << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + pw << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">" << k / 4.0
      << "</text>\n";
  }
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << fr.H0 - 12
    << "\" text-anchor=\"middle\">job completion time (s, log scale)</text>\n";
  o << "<text transform=\"translate(18," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">fraction of jobs</text>\n";
}

// One CDF polyline per result (at most 400 points) and its legend entry.
void svg_cdfs(std::ostringstream& o, const SvgFrame& fr, const std::vector<SimResult>& rs) {
  for (size_t i = 0; i < rs.size(); ++i) {
    std::vector<double> v;
    for (const JobResult& j : rs[i].jobs) v.push_back(j.jct());
    std::sort(v.begin(), v.end());
    const char* color = kColors[i % 10];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
    const size_t steps = std::min<size_t>(v.size(), 400);
    for (size_t k = 0; k < steps; ++k) {
      size_t idx = steps == 1 ? 0 : k * (v.size() - 1) / (steps - 1);
      o << fr.X(v[idx]) << "," << fr.Y((idx + 1.0) / v.size()) << " ";
    }
    o << "\"/>\n";
    double ly = fr.top + 14 + 18.0 * i;
    const double lx = fr.left + fr.pw;
    o << "<line x1=\"" << lx + 12 << "\" y1=\"" << ly << "\" x2=\"" << lx + 36 << "\" y2=\"" << ly << "\" stroke=\""
      << color << "\" stroke-width=\"2\"/>\n<text x=\"" << lx + 42 << "\" y=\"" << ly + 4 << "\">"
      << xml_escape(rs[i].policy) << "</text>\n";
  }
}

// rho per team: bars grouped by team, a dashed line at 1 (as good as alone on the share).
void svg_rho_bars(std::ostringstream& o, const SvgFrame& fr, const std::vector<SimResult>& rs, const SimResult& teams,
                  double bars_h) {
  const double left = fr.left, pw = fr.pw, y0 = fr.H0 + 20, bh = bars_h - 80;
  double most = 1.0;
  for (const SimResult& r : rs)
    if (r.fairness)
      for (const TeamFairness& t : r.fairness->teams) most = std::max(most, t.rho);
  most = std::ceil(most * 2) / 2;
  auto BY = [&](double v) { return y0 + bh - v / most * bh; };
  const size_t nt = teams.fairness->teams.size();
  std::vector<size_t> with;
  for (size_t i = 0; i < rs.size(); ++i)
    if (rs[i].fairness) with.push_back(i);
  const double group = pw / std::max<size_t>(nt, 1), bw = group * 0.8 / std::max<size_t>(with.size(), 1);
  o << "<text x=\"" << fr.W / 2 << "\" y=\"" << y0 - 4
    << "\" text-anchor=\"middle\">rho per team: average JCT shared / alone on its share</text>\n";
  o << "<rect x=\"" << left << "\" y=\"" << y0 << "\" width=\"" << pw << "\" height=\"" << bh
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  for (double v = 0; v <= most + 1e-9; v += 0.5)
    o << "<text x=\"" << left - 6 << "\" y=\"" << BY(v) + 4 << "\" text-anchor=\"end\">" << v << "</text>\n";
  o << "<line x1=\"" << left << "\" y1=\"" << BY(1) << "\" x2=\"" << left + pw << "\" y2=\"" << BY(1)
    << "\" stroke=\"black\" stroke-dasharray=\"4,3\"/>\n";
  for (size_t t = 0; t < nt; ++t) {
    const double gx = left + group * t + group * 0.1;
    for (size_t k = 0; k < with.size(); ++k) {
      const Fairness& f = *rs[with[k]].fairness;
      if (t >= f.teams.size()) continue;
      const double v = f.teams[t].rho;
      o << "<rect x=\"" << gx + bw * k << "\" y=\"" << BY(v) << "\" width=\"" << bw * 0.9 << "\" height=\""
        << y0 + bh - BY(v) << "\" fill=\"" << kColors[with[k] % 10] << "\"/>\n";
    }
    o << "<text x=\"" << gx + group * 0.4 << "\" y=\"" << y0 + bh + 14 << "\" text-anchor=\"middle\" font-size=\"10\">"
      << xml_escape(teams.fairness->teams[t].team) << "</text>\n";
  }
}

}  // namespace

std::string to_svg(const std::vector<SimResult>& rs, const std::string& title) {
  // With fairness, a second panel below the CDFs: each team's rho, one bar per result.
  const SimResult* teams = nullptr;
  for (const SimResult& r : rs)
    if (r.fairness && !teams) teams = &r;
  const SvgFrame fr = svg_frame(rs);
  const double bars_h = teams ? 300 : 0, W = fr.W, H = fr.H0 + bars_h;
  std::ostringstream o;
  o << std::fixed << std::setprecision(1);
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << xml_escape(title)
    << "</text>\n";
  svg_axes(o, fr);
  svg_cdfs(o, fr, rs);
  if (teams) svg_rho_bars(o, fr, rs, *teams, bars_h);
  o << "</svg>\n";
  return o.str();
}

}  // namespace ember::sched
