// The devices a scheduler hands out, grouped in nodes. A gang of g devices must sit on as few
// nodes as the node sizes allow (one node when g fits in the largest node), which is the only way
// placement matters: durations never depend on where a job runs, but a badly packed cluster can
// leave enough free devices in total while no node can take the next gang.
//
// Topology is the fixed shape, FreeMap a cheap copyable count of free devices per node that
// policies plan on, Cluster the live ownership of every device that the driver (simulator or
// daemon) updates when it applies a policy's decision.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/job.h"

namespace ember::sched {

struct NodeSpec {
  int gpus = 0;
  double mem_per_gpu = 0;  // GiB on each device; 0: unlimited/unknown, fits any job
  int type = 0;            // device type (Topology::type_name): h200, a100, ...; one type per node
};

// One device type of a heterogeneous cluster: `count` devices called `name`.
struct DeviceType {
  std::string name;
  int count = 0;
};

// `count` devices of node `node`.
struct Slice {
  int node = 0;
  int count = 0;
  bool operator==(const Slice&) const = default;
};
using Placement = std::vector<Slice>;

class Topology {
 public:
  Topology() = default;
  // `type_names`: the names of NodeSpec::type 0, 1, ... (missing ones are "").
  explicit Topology(std::vector<NodeSpec> nodes, std::vector<std::string> type_names = {});
  // `gpus` devices in nodes of `node_gpus` (the last node takes the remainder); node_gpus <= 0
  // or >= gpus makes one node, that is a flat pool where placement never blocks a job.
  static Topology uniform(int gpus, int node_gpus, double mem_per_gpu = 0);
  // Several device types, each in nodes of `node_gpus` (as uniform); nodes of the first type first.
  static Topology typed(const std::vector<DeviceType>& types, int node_gpus, double mem_per_gpu = 0);
  // "h200:64,a100:128,v100:128": throws ember::Error naming the part that is not NAME:COUNT, a
  // repeated name or a count < 1.
  static std::vector<DeviceType> parse_types(const std::string& spec);

  int num_types() const { return static_cast<int>(type_names_.size()); }
  const std::string& type_name(int t) const { return type_names_[t]; }
  int devices_of_type(int t) const { return type_devices_[t]; }

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int num_devices() const { return total_; }
  const NodeSpec& node(int n) const { return nodes_[n]; }
  int first_device(int n) const { return first_[n]; }
  int node_of(int device) const { return stride_ > 0 ? device / stride_ : node_of_slow(device); }
  bool eligible(int n, double mem) const {
    return mem <= 0 || nodes_[n].mem_per_gpu <= 0 || nodes_[n].mem_per_gpu >= mem;
  }
  // Fewest nodes that could ever hold a gang of `gpus` devices of `mem` GiB each; -1 when even
  // the whole empty cluster cannot (such a job must be rejected, it would wait forever).
  int min_nodes(int gpus, double mem = 0) const;
  // Every node has the same memory per device (placement ties are then broken by index alone).
  bool uniform_memory() const { return uniform_memory_; }

 private:
  int node_of_slow(int device) const;
  std::vector<NodeSpec> nodes_;
  std::vector<std::string> type_names_ = {""};
  std::vector<int> type_devices_;
  std::vector<int> first_;
  int stride_ = 0;                   // every node but the last has this many devices (0: sizes vary)
  std::vector<int> prefix_by_size_;  // prefix sums of node sizes, largest first
  int total_ = 0;
  bool uniform_memory_ = true;
};

class FreeMap {
 public:
  FreeMap() = default;
  explicit FreeMap(const Topology& topo);  // everything free

  const Topology& topology() const { return *topo_; }
  int free(int node) const { return free_[node]; }
  int total_free() const { return total_free_; }
  int max_free() const;

  void take(const Placement& p);
  void give(const Placement& p);
  // Sum of the `k` largest per-node free counts (memory not considered): no gang needing more
  // devices than this on k nodes can be placed.
  int top_free(int k) const;

  // Best fit: the gang goes on the node(s) that it leaves fullest, so that big holes stay open
  // for big gangs; ties go to the node with the least memory per device, then the lowest index.
  // With `types` (indexed by NodeSpec::type), only on nodes of the types it marks.
  std::optional<Placement> best_fit(int gpus, double mem = 0, const std::vector<char>* types = nullptr) const;
  // The preferred node when the gang fits there whole, else best fit (a search policy's move).
  std::optional<Placement> place_preferring(int node, int gpus, double mem = 0) const;

 private:
  // Node `n` leaves free level `from` for level `to` (from < 0: it enters).
  void move_level(int n, int from, int to) {
    if (nodes_at_.empty()) return;
    if (from >= 0) {
      --nodes_at_[from];
      level_bits_[static_cast<size_t>(from) * words_ + n / 64] &= ~(uint64_t{1} << (n % 64));
    }
    ++nodes_at_[to];
    level_bits_[static_cast<size_t>(to) * words_ + n / 64] |= uint64_t{1} << (n % 64);
  }
  // Lowest-numbered node with exactly `level` free devices (one must exist).
  int first_at(int level) const;

  const Topology* topo_ = nullptr;
  std::vector<int> free_;
  int total_free_ = 0;
  // How many nodes have each free count (when nodes hold at most kMaxCounted devices): lets a
  // placement that cannot succeed fail at once instead of scanning every node, which on a
  // congested cluster is most placements tried.
  static constexpr int kMaxCounted = 256;
  std::vector<int> nodes_at_;
  // And which nodes: one bit per node for each level, so that the lowest-numbered node of a level
  // is found 64 nodes at a time.
  std::vector<uint64_t> level_bits_;
  size_t words_ = 0;
};

// Where a running job's devices are, node by node.
Placement placement_of(const Topology& t, const Job& j);

// Empty string when `p` is a valid home for a gang of `gpus` x `mem` on `free`, else why not.
std::string placement_problem(const FreeMap& free, const Placement& p, int gpus, double mem);

class Cluster {
 public:
  explicit Cluster(Topology topo);
  Cluster(const Cluster&) = delete;  // FreeMap points into the topology
  Cluster& operator=(const Cluster&) = delete;

  const Topology& topology() const { return topo_; }
  const FreeMap& free() const { return free_; }
  int num_devices() const { return topo_.num_devices(); }
  JobId owner(int device) const { return owner_[device]; }
  int busy() const { return num_devices() - free_.total_free(); }

  // Gives the job the lowest-numbered free devices of each slice; throws ember::Error naming
  // the job when the placement is not valid (a policy bug, never silently repaired).
  std::vector<int> allocate(const Job& job, const Placement& p);
  // Gives the job exactly `devices` (a restarted daemon re-adopting a running job); throws
  // ember::Error when one does not exist or is held by another job.
  void allocate_exact(const Job& job, const std::vector<int>& devices);
  void release(const Job& job);

 private:
  Topology topo_;
  FreeMap free_;
  std::vector<JobId> owner_;
};

}  // namespace ember::sched
