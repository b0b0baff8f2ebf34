#include "scheduler/daemon/slurm_output.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "core/error.h"

namespace ember::sched {
namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// `s` as a whole number of at most `max`, or nothing (std::stoi would throw std::out_of_range on
// a long run of digits, which is no ember::Error).
std::optional<int64_t> whole_number(const std::string& s, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

// Field `key` of `scontrol show job -o` output ("" when absent).
std::string field(const std::string& line, const std::string& key) {
  const std::string k = " " + key + "=";
  size_t at = (" " + line).find(k);
  if (at == std::string::npos) return "";
  at += k.size() - 1;
  const size_t end = line.find_first_of(" \n", at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// GPUs in a GRES string: "gpu:4", "gpu:a100:4(S:0-1)", "gpu:2,mps:100". `where` names the line.
int64_t gpus_in(const std::string& gres, const std::string& where) {
  int64_t total = 0;
  std::stringstream ss(gres);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.rfind("gpu", 0) != 0) continue;
    item = item.substr(0, item.find('('));
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) continue;
    const std::string n = item.substr(colon + 1);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;  // a type name
    const std::optional<int64_t> k = whole_number(n, kSlurmMaxNodeDevices);
    EMBER_CHECK(k, where, ": GRES '", gres, "' counts ", n, " GPUs, expected at most ", kSlurmMaxNodeDevices);
    total += *k;
  }
  EMBER_CHECK(total <= kSlurmMaxNodeDevices, where, ": GRES '", gres, "' counts ", total, " GPUs, expected at most ",
              kSlurmMaxNodeDevices);
  return total;
}

}  // namespace

Pool parse_sinfo(const std::string& out, const std::string& partition) {
  Pool p;
  std::set<std::string> seen;
  std::stringstream ss(out);
  int no = 0;
  for (std::string line; std::getline(ss, line);) {
    ++no;
    std::stringstream ls(line);
    std::string node, cpus, gres;
    if (!std::getline(ls, node, '|') || !std::getline(ls, cpus, '|')) continue;
    std::getline(ls, gres);
    if (node.empty() || !seen.insert(node).second) continue;
    const std::string where = "--backend slurm: sinfo line " + std::to_string(no) + " (node " + node + ")";
    const int64_t g = gpus_in(trimmed(gres), where);
    // The CPU count's leading digits ("8", or "8+" where a node's count varies); a node whose
    // count sinfo cannot give ("N/A") brings one device.
    const std::string cs = trimmed(cpus);
    const std::string digits = cs.substr(0, cs.find_first_not_of("0123456789"));
    const std::optional<int64_t> c = whole_number(digits, kSlurmMaxNodeDevices);
    EMBER_CHECK(c || digits.empty(), where, ": ", cs, " CPUs, expected at most ", kSlurmMaxNodeDevices);
    const int64_t n = g > 0 ? g : std::max<int64_t>(1, c.value_or(1));
    EMBER_CHECK(static_cast<int64_t>(p.devices.size()) + n <= kSlurmMaxPoolDevices, where,
                ": the partition holds more than ", kSlurmMaxPoolDevices, " devices, more than one daemon schedules");
    for (int64_t i = 0; i < n; ++i) {
      PoolDevice d;
      d.node = node;
      d.name = node + (g > 0 ? "/gpu" : "/cpu") + std::to_string(i);
      d.cuda_index = g > 0 ? static_cast<int>(i) : -1;
      p.devices.push_back(d);
    }
  }
  EMBER_CHECK(!p.devices.empty(), "--backend slurm: sinfo lists no node",
              partition.empty() ? std::string() : " in partition " + partition);
  return p;
}

std::optional<int64_t> parse_sbatch_id(const std::string& out) {
  const std::string t = trimmed(out);
  return whole_number(t.substr(0, t.find(';')), INT64_MAX);
}

SlurmJob parse_scontrol_job(const std::string& out) {
  SlurmJob j;
  j.known = true;
  j.state = field(out, "JobState");
  j.reason = field(out, "Reason");
  static const std::set<std::string> kEnded = {"COMPLETED",     "FAILED",    "CANCELLED", "TIMEOUT",   "NODE_FAIL",
                                               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",  "PREEMPTED", "SPECIAL_EXIT"};
  j.ended = kEnded.count(j.state) > 0;
  const std::string code = field(out, "ExitCode");  // "status:signal"
  const size_t colon = code.find(':');
  if (j.ended && colon != std::string::npos) {
    // Exit statuses are 0..255 and signals 1..64; anything else reads as a failure (255) rather
    // than overflowing int as std::atoi would.
    const std::optional<int64_t> status = whole_number(code.substr(0, colon), 255);
    const std::optional<int64_t> sig = whole_number(code.substr(colon + 1), 127);
    j.exit_code = sig && *sig > 0 ? 128 + static_cast<int>(*sig) : status ? static_cast<int>(*status) : 255;
  }
  return j;
}

std::optional<int64_t> parse_squeue_newest(const std::string& out) {
  std::optional<int64_t> newest;
  std::stringstream ss(out);
  for (std::string line; std::getline(ss, line);) {
    const std::optional<int64_t> id = whole_number(trimmed(line), INT64_MAX);
    if (id) newest = std::max<int64_t>(newest.value_or(0), *id);
  }
  return newest;
}

}  // namespace ember::sched
