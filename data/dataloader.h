// DataLoader: turns a Dataset into batches. The batch order for a seed is a pure function of
// (seed, epoch), and every example gets its own Generator derived from (seed, epoch, index), so
// the batches are identical whatever the number of worker threads and after a checkpoint/resume
// (position() / set_position()). Worker threads build batches ahead of the consumer through a
// bounded window. With world_size > 1 each rank receives its share of every global batch (equal
// shares by default, or in proportion to `shard_weights`), which is how data-parallel training
// splits a mini-batch; a last partial batch smaller than the world size is dropped.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/pinned_allocator.h"
#include "data/dataset.h"

namespace ember::data {

struct LoaderOptions {
  int64_t batch_size = 64;  // the global batch (summed over ranks)
  bool shuffle = true;
  bool drop_last = false;
  int workers = 0;   // 0: batches are built on the consumer's thread
  int prefetch = 2;  // batches in flight per worker
  uint64_t seed = 0;
  // Batches in page-locked host memory (core/pinned_allocator.h) so that their
  // copy to a GPU is asynchronous; set it when the model lives on CUDA. Without a registered
  // pinned allocator (no GPU, CPU-only build) batches stay in ordinary memory.
  bool pin_memory = false;
  int rank = 0;
  int world_size = 1;
  std::vector<double> shard_weights;  // per rank; empty = equal
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // next batch to deliver within the epoch
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, LoaderOptions opts);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const;
  int64_t size() const { return batches_per_epoch(); }
  const LoaderOptions& options() const { return opts_; }
  // True when batches are actually placed in pinned memory (pin_memory and an allocator).
  bool pins_memory() const { return opts_.pin_memory && pinned_host_allocator() != nullptr; }

  LoaderPosition position() const { return pos_; }
  void set_position(LoaderPosition p);
  void set_epoch(int64_t epoch) { set_position({epoch, 0}); }
  // Re-weights the shards (takes effect from the next batch built).
  void set_shard_weights(std::vector<double> w);

  // The global-batch example indices of batch `b` of `epoch`, and this rank's slice of them.
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t b) const;
  std::vector<int64_t> rank_slice(const std::vector<int64_t>& global) const;
  // Sizes of every rank's share of a global batch of n examples (largest-remainder rounding).
  static std::vector<int64_t> shard_sizes(int64_t n, int world_size, const std::vector<double>& weights);

  class Iterator;
  // Iterates over the rest of the current epoch; reaching the end moves to the next epoch.
  Iterator begin();
  Iterator end();

 private:
  friend class Iterator;
  Example build(int64_t epoch, int64_t b) const;
  void start_workers();
  void stop_workers();
  Example next_batch();  // blocks; called by the iterator

  const Dataset& ds_;
  LoaderOptions opts_;
  LoaderPosition pos_;
  void ensure_perm(int64_t epoch) const;
  mutable std::vector<int64_t> perm_cache_;
  mutable int64_t perm_cache_epoch_ = -1;

  // worker state
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Example> ready_;
  std::exception_ptr error_;
  int64_t next_to_build_ = 0, epoch_building_ = 0, window_end_ = 0;
  bool stop_ = false;
  bool running_ = false;
};

class DataLoader::Iterator {
 public:
  Iterator() = default;
  Iterator(DataLoader* dl, bool end);
  Example& operator*() { return cur_; }
  Example* operator->() { return &cur_; }
  Iterator& operator++();
  bool operator==(const Iterator& o) const { return done_ == o.done_; }
  bool operator!=(const Iterator& o) const { return !(*this == o); }

 private:
  DataLoader* dl_ = nullptr;
  Example cur_;
  bool done_ = true;
};

}  // namespace ember::data
