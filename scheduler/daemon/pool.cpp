#include "scheduler/daemon/pool.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/error.h"

namespace ember::sched {
namespace {

std::vector<int> usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  if (cores.empty()) cores.push_back(0);
  return cores;
}

long parse_count(const std::string& text, const std::string& spec) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  EMBER_CHECK(!text.empty() && *end == '\0' && v >= 1 && v <= 4096, "--devices ", spec,
              ": expected a whole number between 1 and 4096, got '", text, "'");
  return v;
}

Pool cpu_pool(const std::string& spec, const std::string& rest, double mem) {
  std::vector<int> cores = usable_cores();
  long n, c;
  if (size_t x = rest.find('x'); x != std::string::npos) {
    n = parse_count(rest.substr(0, x), spec);
    c = parse_count(rest.substr(x + 1), spec);
  } else {
    n = parse_count(rest, spec);
    c = std::max<long>(1, static_cast<long>(cores.size()) / n);
  }
  Pool p;
  for (long d = 0; d < n; ++d) {
    PoolDevice dev;
    dev.name = "cpu" + std::to_string(d);
    dev.memory_gib = mem;
    for (long k = 0; k < c; ++k) dev.cores.push_back(cores[(d * c + k) % cores.size()]);
    p.devices.push_back(std::move(dev));
  }
  return p;
}

Pool gpu_pool(const std::vector<GpuInfo>& gpus) {
  Pool p;
  // Types only on a machine of several: one type tells the policies nothing, and a type the
  // default speed table lacks would stop the daemon from starting on an ordinary machine.
  bool several = false, unnamed = false;
  for (const GpuInfo& g : gpus) {
    several = several || g.type != gpus[0].type;
    unnamed = unnamed || g.type.empty();
  }
  const bool typed = several && !unnamed;
  for (const GpuInfo& g : gpus)
    p.devices.push_back({"gpu" + std::to_string(g.index), g.index, g.memory_gib, {}, "", typed ? g.type : ""});
  // Same-memory GPUs next to each other: each memory size becomes one node of the topology (and,
  // typed, each type within it); the types in the order nvidia-smi first lists them.
  std::vector<std::string> order;
  for (const PoolDevice& d : p.devices)
    if (std::find(order.begin(), order.end(), d.type) == order.end()) order.push_back(d.type);
  auto rank = [&](const PoolDevice& d) { return std::find(order.begin(), order.end(), d.type) - order.begin(); };
  std::stable_sort(p.devices.begin(), p.devices.end(), [&](const PoolDevice& a, const PoolDevice& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.memory_gib > b.memory_gib;
  });
  return p;
}

}  // namespace

std::string gpu_type(const std::string& name) {
  std::vector<std::string> words;
  std::stringstream ss(name);
  for (std::string w; ss >> w;) {
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    words.push_back(w);
  }
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.find_first_of("0123456789") == std::string::npos) continue;
    std::string t = w.substr(0, w.find('-'));
    if (t.find_first_not_of("0123456789") == std::string::npos && i > 0) t = words[i - 1] + t;
    return t;
  }
  return "";
}

std::vector<GpuInfo> query_gpus() {
  std::vector<GpuInfo> out;
  // The name last: it is free text, the rest of the line.
  FILE* f = ::popen("nvidia-smi --query-gpu=index,memory.total,name --format=csv,noheader,nounits 2>/dev/null", "r");
  if (!f) return out;
  char line[512];
  while (std::fgets(line, sizeof(line), f)) {
    int idx, used = 0;
    double mib;
    if (std::sscanf(line, "%d , %lf%n", &idx, &mib, &used) < 2) continue;
    std::string rest = line + used;
    const size_t comma = rest.find(',');
    const std::string name = comma == std::string::npos ? "" : rest.substr(comma + 1);
    out.push_back({idx, mib / 1024.0, gpu_type(name)});
  }
  ::pclose(f);
  return out;
}

Pool make_pool(const std::string& spec, double cpu_memory_gib) {
  EMBER_CHECK(cpu_memory_gib >= 0, "--cpu-mem: expected GiB >= 0, got ", cpu_memory_gib);
  if (spec == "auto") {
    auto gpus = query_gpus();
    if (!gpus.empty()) return gpu_pool(gpus);
    return cpu_pool(spec, std::to_string(usable_cores().size()) + "x1", cpu_memory_gib);
  }
  if (spec.rfind("cpu:", 0) == 0 && spec.find('@') != std::string::npos) {
    // Typed virtual devices: "cpu:1@slow,1@fast".
    std::vector<std::pair<long, std::string>> parts;
    long total = 0;
    std::stringstream ss(spec.substr(4));
    for (std::string item; std::getline(ss, item, ',');) {
      const size_t at = item.find('@');
      EMBER_CHECK(at != std::string::npos && at + 1 < item.size(), "--devices ", spec,
                  ": expected cpu:N@TYPE,M@TYPE,..., got '", item, "'");
      const std::string type = item.substr(at + 1);
      for (const auto& p : parts) EMBER_CHECK(p.second != type, "--devices ", spec, ": type '", type, "' listed twice");
      parts.push_back({parse_count(item.substr(0, at), spec), type});
      total += parts.back().first;
    }
    Pool p = cpu_pool(spec, std::to_string(total), cpu_memory_gib);
    size_t d = 0;
    for (const auto& [n, type] : parts)
      for (long k = 0; k < n; ++k) p.devices[d++].type = type;
    return p;
  }
  if (spec.rfind("cpu:", 0) == 0) return cpu_pool(spec, spec.substr(4), cpu_memory_gib);
  if (spec == "gpu" || spec.rfind("gpu:", 0) == 0) {
    auto gpus = query_gpus();
    EMBER_CHECK(!gpus.empty(), "--devices ", spec, ": nvidia-smi lists no GPU on this machine (use cpu:N)");
    if (spec == "gpu") return gpu_pool(gpus);
    std::map<int, GpuInfo> found;
    for (const GpuInfo& g : gpus) found[g.index] = g;
    std::vector<GpuInfo> chosen;
    std::stringstream ss(spec.substr(4));
    for (std::string item; std::getline(ss, item, ',');) {
      EMBER_CHECK(item.find_first_not_of("0123456789") == std::string::npos && !item.empty() && item.size() < 6,
                  "--devices ", spec, ": expected GPU indices like gpu:0,1, got '", item, "'");
      int idx = std::atoi(item.c_str());
      EMBER_CHECK(found.count(idx), "--devices ", spec, ": there is no GPU ", idx, " (nvidia-smi lists ", gpus.size(),
                  ")");
      for (const auto& c : chosen) EMBER_CHECK(c.index != idx, "--devices ", spec, ": GPU ", idx, " listed twice");
      chosen.push_back(found[idx]);
    }
    return gpu_pool(chosen);
  }
  EMBER_FAIL("--devices: expected auto, gpu, gpu:I,J,..., cpu:N, cpu:NxC or cpu:N@TYPE,M@TYPE,..., got '", spec, "'");
}

Topology Pool::topology() const {
  EMBER_CHECK(!devices.empty(), "device pool is empty");
  std::vector<NodeSpec> nodes;
  std::vector<std::string> types;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto t = std::find(types.begin(), types.end(), devices[i].type);
    if (t == types.end()) t = types.insert(types.end(), devices[i].type);
    if (i == 0 || devices[i].memory_gib != devices[i - 1].memory_gib || devices[i].node != devices[i - 1].node ||
        devices[i].type != devices[i - 1].type)
      nodes.push_back({0, devices[i].memory_gib, static_cast<int>(t - types.begin())});
    nodes.back().gpus += 1;
  }
  return Topology(std::move(nodes), std::move(types));
}

std::string Pool::describe() const {
  std::ostringstream os;
  if (!devices.empty() && !devices[0].node.empty()) {
    std::vector<std::string> nodes;
    for (const PoolDevice& d : devices)
      if (nodes.empty() || nodes.back() != d.node) nodes.push_back(d.node);
    os << devices.size() << (cpu() ? " CPU(s)" : " GPU(s)") << " on " << nodes.size() << " Slurm node(s):";
    for (const std::string& n : nodes) os << " " << n;
    return os.str();
  }
  if (cpu()) {
    os << devices.size() << " CPU device(s) of " << devices[0].cores.size() << " core(s) each";
    if (devices[0].memory_gib > 0) os << ", " << devices[0].memory_gib << " GiB each";
    if (typed()) {
      os << ", types:";
      for (size_t i = 0; i < devices.size(); ++i)
        if (i == 0 || devices[i].type != devices[i - 1].type) os << " " << devices[i].type;
    }
  } else {
    os << devices.size() << " GPU(s):";
    for (const PoolDevice& d : devices)
      os << " " << d.name << " (" << (d.type.empty() ? "" : d.type + ", ") << d.memory_gib << " GiB)";
  }
  return os.str();
}

}  // namespace ember::sched
