#include "data/dataloader.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <numeric>

#include "core/error.h"
#include "core/ops/creation.h"

namespace ember::data {

namespace {

// SplitMix64: mixes (seed, epoch, index) into independent per-example generator seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A copy of a CPU tensor in storage from `alloc` (contiguous, no autograd history).
Tensor copy_to_allocator(const Tensor& t, Allocator* alloc) {
  Tensor src = t.contiguous();
  const size_t nbytes = static_cast<size_t>(src.numel()) * src.itemsize();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(alloc->allocate(nbytes), nbytes, Device::cpu());
  impl->shape = src.shape();
  impl->strides = contiguous_strides(src.shape());
  impl->dtype = src.dtype();
  if (nbytes) std::memcpy(impl->storage->ptr(), src.raw_data(), nbytes);
  return Tensor(std::move(impl));
}

}  // namespace

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions opts) : ds_(dataset), opts_(std::move(opts)) {
  EMBER_CHECK(opts_.batch_size > 0, "DataLoader: batch_size must be positive, got ", opts_.batch_size);
  EMBER_CHECK(opts_.workers >= 0, "DataLoader: workers must be >= 0, got ", opts_.workers);
  EMBER_CHECK(opts_.prefetch >= 1, "DataLoader: prefetch must be >= 1, got ", opts_.prefetch);
  EMBER_CHECK(opts_.world_size >= 1 && opts_.rank >= 0 && opts_.rank < opts_.world_size, "DataLoader: rank ",
              opts_.rank, " is not in [0, world_size ", opts_.world_size, ")");
  EMBER_CHECK(opts_.batch_size >= opts_.world_size, "DataLoader: batch_size ", opts_.batch_size,
              " is smaller than the world size ", opts_.world_size, " (every rank needs at least one example)");
  set_shard_weights(opts_.shard_weights);
}

DataLoader::~DataLoader() {
  stop_workers();
}

void DataLoader::set_shard_weights(std::vector<double> w) {
  if (!w.empty()) {
    EMBER_CHECK(static_cast<int>(w.size()) == opts_.world_size, "DataLoader: ", w.size(),
                " shard weights for a world of ", opts_.world_size);
    for (double x : w) EMBER_CHECK(x > 0 && std::isfinite(x), "DataLoader: shard weights must be positive, got ", x);
  }
  std::lock_guard<std::mutex> lock(mu_);
  opts_.shard_weights = std::move(w);
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = ds_.size(), b = opts_.batch_size;
  if (opts_.drop_last) return n / b;
  // A last batch too small to give every rank an example is dropped: an empty shard would leave
  // a rank without a step while the others wait for it in the gradient all-reduce.
  if (n % b != 0 && n % b < opts_.world_size) return n / b;
  return (n + b - 1) / b;
}

void DataLoader::set_position(LoaderPosition p) {
  EMBER_CHECK(p.epoch >= 0 && p.batch >= 0 && p.batch <= batches_per_epoch(), "DataLoader: position (epoch ", p.epoch,
              ", batch ", p.batch, ") is out of range (", batches_per_epoch(), " batches per epoch)");
  stop_workers();
  pos_ = p;
}

void DataLoader::ensure_perm(int64_t epoch) const {
  if (perm_cache_epoch_ == epoch) return;
  const int64_t n = ds_.size();
  if (opts_.shuffle) {
    Generator g(mix(opts_.seed ^ mix(static_cast<uint64_t>(epoch) + 1)));
    perm_cache_ = randperm(n, &g).to_vector<int64_t>();
  } else {
    perm_cache_.resize(static_cast<size_t>(n));
    std::iota(perm_cache_.begin(), perm_cache_.end(), 0);
  }
  perm_cache_epoch_ = epoch;
}

std::vector<int64_t> DataLoader::batch_indices(int64_t epoch, int64_t b) const {
  ensure_perm(epoch);
  const int64_t n = ds_.size(), start = b * opts_.batch_size, stop = std::min(n, start + opts_.batch_size);
  return {perm_cache_.begin() + start, perm_cache_.begin() + stop};
}

std::vector<int64_t> DataLoader::shard_sizes(int64_t n, int world, const std::vector<double>& weights) {
  std::vector<double> w = weights.empty() ? std::vector<double>(static_cast<size_t>(world), 1.0) : weights;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<int64_t> sizes(static_cast<size_t>(world));
  std::vector<std::pair<double, int>> rem;
  int64_t assigned = 0;
  for (int r = 0; r < world; ++r) {
    double exact = static_cast<double>(n) * w[r] / total;
    sizes[r] = static_cast<int64_t>(std::floor(exact));
    assigned += sizes[r];
    rem.emplace_back(exact - static_cast<double>(sizes[r]), r);
  }
  // Largest remainders first; ties go to the lower rank so every rank computes the same split.
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t i = 0; i < n - assigned; ++i) sizes[rem[static_cast<size_t>(i)].second]++;
  return sizes;
}

std::vector<int64_t> DataLoader::rank_slice(const std::vector<int64_t>& global) const {
  if (opts_.world_size == 1) return global;
  std::vector<int64_t> sizes = shard_sizes(static_cast<int64_t>(global.size()), opts_.world_size, opts_.shard_weights);
  int64_t start = 0;
  for (int r = 0; r < opts_.rank; ++r) start += sizes[r];
  return {global.begin() + start, global.begin() + start + sizes[opts_.rank]};
}

Example DataLoader::build(int64_t epoch, int64_t b) const {
  std::vector<int64_t> idx = rank_slice(batch_indices(epoch, b));
  std::deque<Generator> gens;  // Generator holds a mutex: not movable, so no vector
  std::vector<Generator*> ptrs;
  for (int64_t i : idx) {
    gens.emplace_back(mix(opts_.seed ^ mix((static_cast<uint64_t>(epoch) << 40) ^ static_cast<uint64_t>(i))));
  }
  for (auto& g : gens) ptrs.push_back(&g);
  Example e = ds_.get_batch(idx, ptrs);
  if (Allocator* pinned = opts_.pin_memory ? pinned_host_allocator() : nullptr) {
    // One extra host copy per batch (a few hundred KB for MNIST) buys an asynchronous upload.
    e.input = copy_to_allocator(e.input, pinned);
    e.target = copy_to_allocator(e.target, pinned);
  }
  return e;
}

// ------------------------------------------------------------ workers

void DataLoader::start_workers() {
  stop_workers();
  ensure_perm(pos_.epoch);  // build the permutation once, before threads read it
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
  error_ = nullptr;
  ready_.clear();
  epoch_building_ = pos_.epoch;
  next_to_build_ = pos_.batch;
  window_end_ = pos_.batch + static_cast<int64_t>(opts_.workers) * opts_.prefetch;
  running_ = true;
  const int64_t nb = batches_per_epoch();
  for (int w = 0; w < opts_.workers; ++w) {
    threads_.emplace_back([this, nb] {
      while (true) {
        int64_t b;
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait(l, [&] { return stop_ || (next_to_build_ < nb && next_to_build_ < window_end_); });
          if (stop_) return;
          b = next_to_build_++;
        }
        Example e;
        std::exception_ptr err;
        try {
          e = build(epoch_building_, b);
        } catch (...) {
          err = std::current_exception();
        }
        std::lock_guard<std::mutex> l(mu_);
        if (err && !error_) error_ = err;
        ready_[b] = std::move(e);
        cv_.notify_all();
      }
    });
  }
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
  running_ = false;
}

Example DataLoader::next_batch() {
  const int64_t b = pos_.batch;
  if (opts_.workers == 0) {
    Example e = build(pos_.epoch, b);
    ++pos_.batch;
    return e;
  }
  if (!running_) start_workers();
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return ready_.count(b) > 0 || error_ != nullptr; });
  if (error_) {
    std::exception_ptr e = error_;
    l.unlock();
    stop_workers();
    std::rethrow_exception(e);
  }
  Example e = std::move(ready_[b]);
  ready_.erase(b);
  ++pos_.batch;
  ++window_end_;
  cv_.notify_all();
  return e;
}

DataLoader::Iterator DataLoader::begin() {
  if (pos_.batch >= batches_per_epoch()) {
    stop_workers();
    pos_ = {pos_.epoch + 1, 0};
  }
  return Iterator(this, false);
}

DataLoader::Iterator DataLoader::end() {
  return Iterator(this, true);
}

DataLoader::Iterator::Iterator(DataLoader* dl, bool end) : dl_(dl), done_(end) {
  if (!done_) ++*this;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (dl_->pos_.batch >= dl_->batches_per_epoch()) {
    // Epoch finished: the next begin() starts the next epoch.
    dl_->stop_workers();
    dl_->pos_ = {dl_->pos_.epoch + 1, 0};
    done_ = true;
    cur_ = {};
    return *this;
  }
  cur_ = dl_->next_batch();
  return *this;
}

}  // namespace ember::data
