#include "scheduler/cluster.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <functional>

#include "core/error.h"

namespace ember::sched {

Topology::Topology(std::vector<NodeSpec> nodes, std::vector<std::string> type_names) : nodes_(std::move(nodes)) {
  EMBER_CHECK(!nodes_.empty(), "cluster: expected at least one node");
  std::vector<int> sizes;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    EMBER_CHECK(nodes_[n].gpus > 0, "cluster: node ", n, " has ", nodes_[n].gpus, " devices, expected at least 1");
    EMBER_CHECK(nodes_[n].mem_per_gpu >= 0, "cluster: node ", n, " has negative memory per device");
    first_.push_back(total_);
    total_ += nodes_[n].gpus;
    sizes.push_back(nodes_[n].gpus);
    uniform_memory_ = uniform_memory_ && nodes_[n].mem_per_gpu == nodes_[0].mem_per_gpu;
  }
  stride_ = nodes_[0].gpus;
  for (size_t n = 0; n + 1 < nodes_.size(); ++n)
    if (nodes_[n].gpus != stride_) stride_ = 0;
  if (nodes_.back().gpus > stride_) stride_ = 0;
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  int acc = 0;
  for (int s : sizes) prefix_by_size_.push_back(acc += s);
  int types = 1;
  for (const NodeSpec& n : nodes_) {
    EMBER_CHECK(n.type >= 0, "cluster: negative device type");
    types = std::max(types, n.type + 1);
  }
  type_names_ = std::move(type_names);
  type_names_.resize(std::max<size_t>(types, type_names_.size()));
  type_devices_.assign(type_names_.size(), 0);
  for (const NodeSpec& n : nodes_) type_devices_[n.type] += n.gpus;
}

Topology Topology::typed(const std::vector<DeviceType>& types, int node_gpus, double mem_per_gpu) {
  EMBER_CHECK(!types.empty(), "cluster: expected at least one device type");
  std::vector<NodeSpec> nodes;
  for (size_t t = 0; t < types.size(); ++t) {
    EMBER_CHECK(types[t].count > 0, "cluster: device type '", types[t].name, "' has ", types[t].count,
                " devices, expected at least 1");
    const int per = node_gpus <= 0 || node_gpus > types[t].count ? types[t].count : node_gpus;
    for (int left = types[t].count; left > 0; left -= per)
      nodes.push_back({std::min(left, per), mem_per_gpu, static_cast<int>(t)});
  }
  std::vector<std::string> names;
  for (const DeviceType& t : types) names.push_back(t.name);
  return Topology(std::move(nodes), std::move(names));
}

std::vector<DeviceType> Topology::parse_types(const std::string& spec) {
  std::vector<DeviceType> types;
  size_t at = 0;
  while (at <= spec.size()) {
    size_t comma = spec.find(',', at);
    if (comma == std::string::npos) comma = spec.size();
    const std::string part = spec.substr(at, comma - at);
    const size_t colon = part.find(':');
    EMBER_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < part.size(), "device types '", spec,
                "': expected NAME:COUNT,... (e.g. h200:64,a100:128), got '", part, "'");
    const std::string name = part.substr(0, colon), count = part.substr(colon + 1);
    char* end = nullptr;
    const long n = std::strtol(count.c_str(), &end, 10);
    EMBER_CHECK(end == count.c_str() + count.size() && n >= 1 && n <= 10'000'000, "device types '", spec, "': type '",
                name, "' needs a whole number of devices >= 1, got '", count, "'");
    for (const DeviceType& d : types)
      EMBER_CHECK(d.name != name, "device types '", spec, "': type '", name, "' appears twice");
    types.push_back({name, static_cast<int>(n)});
    at = comma + 1;
  }
  return types;
}

Topology Topology::uniform(int gpus, int node_gpus, double mem_per_gpu) {
  EMBER_CHECK(gpus > 0, "cluster: expected a positive number of devices, got ", gpus);
  if (node_gpus <= 0 || node_gpus > gpus) node_gpus = gpus;
  std::vector<NodeSpec> nodes;
  for (int left = gpus; left > 0; left -= node_gpus) nodes.push_back({std::min(left, node_gpus), mem_per_gpu});
  return Topology(std::move(nodes));
}

int Topology::node_of_slow(int device) const {
  auto it = std::upper_bound(first_.begin(), first_.end(), device);
  return static_cast<int>(it - first_.begin()) - 1;
}

int Topology::min_nodes(int gpus, double mem) const {
  if (gpus <= 0) return -1;
  if (mem <= 0) {
    auto it = std::lower_bound(prefix_by_size_.begin(), prefix_by_size_.end(), gpus);
    return it == prefix_by_size_.end() ? -1 : static_cast<int>(it - prefix_by_size_.begin()) + 1;
  }
  std::vector<int> sizes;
  for (int n = 0; n < num_nodes(); ++n)
    if (eligible(n, mem)) sizes.push_back(nodes_[n].gpus);
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  int acc = 0;
  for (size_t k = 0; k < sizes.size(); ++k)
    if ((acc += sizes[k]) >= gpus) return static_cast<int>(k) + 1;
  return -1;
}

FreeMap::FreeMap(const Topology& topo) : topo_(&topo), free_(topo.num_nodes()), total_free_(topo.num_devices()) {
  int largest = 0;
  for (int n = 0; n < topo.num_nodes(); ++n) largest = std::max(largest, free_[n] = topo.node(n).gpus);
  if (largest <= kMaxCounted) {
    nodes_at_.assign(largest + 1, 0);
    words_ = (free_.size() + 63) / 64;
    level_bits_.assign(static_cast<size_t>(largest + 1) * words_, 0);
    for (int n = 0; n < topo.num_nodes(); ++n) move_level(n, -1, free_[n]);
  }
}

int FreeMap::top_free(int k) const {
  int sum = 0;
  if (!nodes_at_.empty()) {
    for (int level = static_cast<int>(nodes_at_.size()) - 1; level > 0 && k > 0; --level) {
      const int c = std::min(k, nodes_at_[level]);
      sum += c * level;
      k -= c;
    }
    return sum;
  }
  std::vector<int> f = free_;
  k = std::min<int>(k, static_cast<int>(f.size()));
  std::partial_sort(f.begin(), f.begin() + k, f.end(), std::greater<>());
  for (int i = 0; i < k; ++i) sum += f[i];
  return sum;
}

int FreeMap::first_at(int level) const {
  const uint64_t* bits = level_bits_.data() + static_cast<size_t>(level) * words_;
  for (size_t w = 0; w < words_; ++w)
    if (bits[w]) return static_cast<int>(w * 64) + std::countr_zero(bits[w]);
  EMBER_FAIL("free map: no node with ", level, " free devices, though one was counted");
}

int FreeMap::max_free() const {
  if (!nodes_at_.empty()) {
    int level = static_cast<int>(nodes_at_.size()) - 1;
    while (level > 0 && nodes_at_[level] == 0) --level;
    return level;
  }
  int m = 0;
  for (int f : free_) m = std::max(m, f);
  return m;
}

void FreeMap::take(const Placement& p) {
  for (const Slice& s : p) {
    move_level(s.node, free_[s.node], free_[s.node] - s.count);
    free_[s.node] -= s.count;
    total_free_ -= s.count;
  }
}

void FreeMap::give(const Placement& p) {
  for (const Slice& s : p) {
    move_level(s.node, free_[s.node], free_[s.node] + s.count);
    free_[s.node] += s.count;
    total_free_ += s.count;
  }
}

std::optional<Placement> FreeMap::best_fit(int gpus, double mem, const std::vector<char>* types) const {
  if (gpus <= 0 || gpus > total_free_) return std::nullopt;
  const Topology& t = *topo_;
  int k = t.min_nodes(gpus, mem);
  if (k < 0) return std::nullopt;
  if (!nodes_at_.empty() && (k == 1 ? max_free() : top_free(k)) < gpus) return std::nullopt;
  auto usable = [&](int n) {
    return t.eligible(n, mem) && (!types || (static_cast<size_t>(t.node(n).type) < types->size() &&
                                             (*types)[static_cast<size_t>(t.node(n).type)]));
  };
  // Tightest node holding `need` devices among those not excluded.
  auto tightest = [&](int need, const std::vector<char>* excluded) -> int {
    int best = -1;
    for (int n = 0; n < t.num_nodes(); ++n) {
      if (free_[n] < need || !usable(n) || (excluded && (*excluded)[n])) continue;
      if (best < 0 || free_[n] < free_[best] ||
          (free_[n] == free_[best] && t.node(n).mem_per_gpu < t.node(best).mem_per_gpu))
        best = n;
    }
    return best;
  };
  if (k == 1 && !nodes_at_.empty() && t.uniform_memory() && !types) {
    // The tightest level that has a node is known: its lowest-numbered node is the answer, found
    // from that level's bits (max_free() >= gpus was checked, so the level exists).
    int level = gpus;
    while (nodes_at_[level] == 0) ++level;
    return Placement{{first_at(level), gpus}};
  }
  if (k == 1) {
    int n = tightest(gpus, nullptr);
    if (n < 0) return std::nullopt;
    return Placement{{n, gpus}};
  }
  // A multi-node gang: the k-1 emptiest nodes whole, the remainder on the tightest other node.
  std::vector<int> order;
  for (int n = 0; n < t.num_nodes(); ++n)
    if (free_[n] > 0 && usable(n)) order.push_back(n);
  if (static_cast<int>(order.size()) < k) return std::nullopt;
  std::partial_sort(order.begin(), order.begin() + (k - 1), order.end(), [&](int a, int b) {
    if (free_[a] != free_[b]) return free_[a] > free_[b];
    if (t.node(a).mem_per_gpu != t.node(b).mem_per_gpu) return t.node(a).mem_per_gpu < t.node(b).mem_per_gpu;
    return a < b;
  });
  Placement p;
  std::vector<char> used(t.num_nodes(), 0);
  int left = gpus;
  for (int i = 0; i < k - 1 && left > 0; ++i) {
    int c = std::min(free_[order[i]], left);
    p.push_back({order[i], c});
    used[order[i]] = 1;
    left -= c;
  }
  if (left > 0) {
    int n = tightest(left, &used);
    if (n < 0) return std::nullopt;
    p.push_back({n, left});
  }
  return p;
}

std::optional<Placement> FreeMap::place_preferring(int node, int gpus, double mem) const {
  if (node >= 0 && node < topo_->num_nodes() && free_[node] >= gpus && topo_->eligible(node, mem) &&
      topo_->min_nodes(gpus, mem) == 1)
    return Placement{{node, gpus}};
  return best_fit(gpus, mem);
}

Placement placement_of(const Topology& t, const Job& j) {
  Placement p;
  for (int d : j.devices) {
    int n = t.node_of(d);
    auto it = std::find_if(p.begin(), p.end(), [n](const Slice& s) { return s.node == n; });
    if (it == p.end())
      p.push_back({n, 1});
    else
      ++it->count;
  }
  return p;
}

std::string placement_problem(const FreeMap& free, const Placement& p, int gpus, double mem) {
  const Topology& t = free.topology();
  int sum = 0;
  std::vector<char> seen(t.num_nodes(), 0);
  for (const Slice& s : p) {
    if (s.node < 0 || s.node >= t.num_nodes()) return detail::concat("node ", s.node, " does not exist");
    if (seen[s.node]) return detail::concat("node ", s.node, " appears twice");
    seen[s.node] = 1;
    if (s.count <= 0) return detail::concat("slice on node ", s.node, " has ", s.count, " devices");
    if (s.count > free.free(s.node))
      return detail::concat("node ", s.node, " has ", free.free(s.node), " free devices, ", s.count, " asked");
    if (!t.eligible(s.node, mem))
      return detail::concat("node ", s.node, " has ", t.node(s.node).mem_per_gpu, " GiB per device, ", mem, " needed");
    sum += s.count;
  }
  if (sum != gpus) return detail::concat("placement has ", sum, " devices, the gang needs ", gpus);
  int k = t.min_nodes(gpus, mem);
  if (static_cast<int>(p.size()) > k)
    return detail::concat("placement spans ", p.size(), " nodes, a gang of ", gpus, " must span at most ", k);
  return {};
}

Cluster::Cluster(Topology topo) : topo_(std::move(topo)), free_(topo_), owner_(topo_.num_devices(), -1) {}

std::vector<int> Cluster::allocate(const Job& job, const Placement& p) {
  std::string why = placement_problem(free_, p, job.spec.gpus, job.spec.mem_per_gpu);
  EMBER_CHECK(why.empty(), "cluster: cannot place job '", job.spec.name, "': ", why);
  std::vector<int> devices;
  for (const Slice& s : p) {
    int first = topo_.first_device(s.node), left = s.count;
    for (int d = first; d < first + topo_.node(s.node).gpus && left > 0; ++d)
      if (owner_[d] < 0) {
        owner_[d] = job.id;
        devices.push_back(d);
        --left;
      }
  }
  free_.take(p);
  return devices;
}

void Cluster::allocate_exact(const Job& job, const std::vector<int>& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    int d = devices[i];
    EMBER_CHECK(d >= 0 && d < num_devices(), "cluster: job '", job.spec.name, "' holds device ", d,
                ", but there are only ", num_devices());
    EMBER_CHECK(owner_[d] < 0, "cluster: job '", job.spec.name, "' holds device ", d, ", which job ", owner_[d],
                " holds too");
    for (size_t k = 0; k < i; ++k)
      EMBER_CHECK(devices[k] != d, "cluster: job '", job.spec.name, "' lists device ", d, " twice");
  }
  Placement p;
  for (int d : devices) {
    owner_[d] = job.id;
    int n = topo_.node_of(d);
    auto it = std::find_if(p.begin(), p.end(), [n](const Slice& s) { return s.node == n; });
    if (it == p.end())
      p.push_back({n, 1});
    else
      ++it->count;
  }
  free_.take(p);
}

void Cluster::release(const Job& job) {
  Placement p;
  for (int d : job.devices) {
    EMBER_CHECK(owner_[d] == job.id, "cluster: job '", job.spec.name, "' releases device ", d, " it does not hold");
    owner_[d] = -1;
    int n = topo_.node_of(d);
    if (!p.empty() && p.back().node == n)
      ++p.back().count;
    else
      p.push_back({n, 1});
  }
  free_.give(p);
}

}  // namespace ember::sched
