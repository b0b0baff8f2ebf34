#include "dist/ddp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/error.h"
#include "core/ops/creation.h"

namespace ember::dist {

struct DistributedDataParallel::Reducer {
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = 0;
    int64_t offset = 0;  // in its bucket's flat buffer
    bool ready = false;
  };
  struct Bucket {
    std::vector<int> params;
    Tensor flat;
    int pending = 0;
    WorkPtr work;
  };
  Communicator* comm = nullptr;
  DdpOptions opts;
  double loss_weight = 1;     // what this rank's loss was scaled by (set_loss_weight)
  std::vector<Param> params;  // reverse registration order
  std::unordered_map<const TensorImpl*, int> index;
  std::vector<Bucket> buckets;
  std::vector<int> unused;  // this backward's parameters that get no gradient, not yet marked
  bool armed = false;       // a forward prepared this backward and sync is on
  int ready_count = 0;
  int next_launch = 0;
  int64_t step = 0;  // synchronised steps, for labels
  DdpTimeline timeline;
  GradNorms norms;

  // Sum of squares, in float64, of a bucket (on whatever device the communicator uses).
  static double sum_of_squares(const Tensor& flat) {
    double s = 0;
    for (double v : flat.to(Device::cpu()).to_vector<double>()) s += v * v;
    return s;
  }

  std::string label(int b) const { return "bucket " + std::to_string(b) + " of step " + std::to_string(step); }

  void launch_ready_buckets(bool all_ready) {
    if (!opts.overlap && !all_ready) return;
    // Same order on every rank: a bucket launches only after every earlier one.
    while (next_launch < static_cast<int>(buckets.size()) && buckets[static_cast<size_t>(next_launch)].pending == 0) {
      Bucket& b = buckets[static_cast<size_t>(next_launch)];
      DdpTimeline::Bucket tb;
      tb.index = next_launch;
      tb.launched = Clock::now();
      timeline.buckets.push_back(tb);
      // The slot holds this rank's gradient x its loss weight / size: both undone for its own norm.
      if (opts.measure_grad_norms) {
        const double unscale = comm->size() / loss_weight;
        norms.local_sqr += sum_of_squares(b.flat) * unscale * unscale;
      }
      b.work = comm->all_reduce(b.flat, ReduceOp::Sum, label(next_launch));  // of gradients / size
      ++next_launch;
    }
  }

  // The slot receives grad / size (the all-reduce sums); a gradient that is already a view of the
  // slot (gradient_as_bucket_view, accumulated in place) is only divided.
  void copy_in(Param& p, const Tensor& grad) {
    Bucket& b = buckets[static_cast<size_t>(p.bucket)];
    Tensor slot = b.flat.narrow(0, p.offset, p.tensor.numel());
    NoGradGuard ng;
    if (!grad.defined()) {
      slot.zero_();
      return;
    }
    if (grad.raw_data() != slot.raw_data()) slot.view(p.tensor.shape()).copy_(grad);
    if (comm->size() > 1) slot.mul_(1.0 / comm->size());
  }

  void mark_ready(int i, const Tensor& grad) {
    Param& p = params[static_cast<size_t>(i)];
    EMBER_CHECK(!p.ready, "DistributedDataParallel: parameter '", p.name,
                "' got a gradient twice in one synchronised backward (backward through the same graph twice, or "
                "a parameter used by two calls of a reentrant backward); use no_sync() for all but the last");
    copy_in(p, grad);
    p.ready = true;
    auto now = Clock::now();
    if (ready_count == 0) timeline.first_grad = now;
    ++ready_count;
    --buckets[static_cast<size_t>(p.bucket)].pending;
    bool all = ready_count == static_cast<int>(params.size());
    if (all) timeline.last_grad = now;
    launch_ready_buckets(all);
  }

  void on_grad(const TensorImpl* leaf, const Tensor& t) {
    if (!armed) return;
    auto it = index.find(leaf);
    if (it == index.end()) return;
    mark_unused_ready();
    mark_ready(it->second, t.grad());
    if (ready_count == static_cast<int>(params.size())) finish();
  }

  void finish() {
    for (size_t bi = 0; bi < buckets.size(); ++bi) {
      Bucket& b = buckets[bi];
      b.work->wait();
      for (auto& tb : timeline.buckets)
        if (tb.index == static_cast<int>(bi)) tb.finished = b.work->finished();
      // Each gradient becomes a view of the bucket itself (gradient_as_bucket_view) or of one copy
      // of it per step: a gradient the engine handed over may alias another tensor, so it is
      // replaced rather than written in place.
      Tensor own = opts.gradient_as_bucket_view ? b.flat : b.flat.clone();
      for (int pi : b.params) {
        Param& p = params[static_cast<size_t>(pi)];
        Tensor view = own.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.shape());
        if (p.tensor.grad().defined() && p.tensor.grad().raw_data() == view.raw_data()) continue;  // already it
        p.tensor.set_grad(view);
      }
      b.work.reset();
      if (opts.measure_grad_norms) norms.global_sqr += sum_of_squares(b.flat);
    }
    if (opts.measure_grad_norms) {
      Tensor t = full({1}, norms.local_sqr, {.dtype = DType::Float64, .device = comm->device()});
      comm->all_reduce(t, ReduceOp::Sum, "gradient norms")->wait();
      norms.local_sqr = t.to(Device::cpu()).item() / comm->size();
      norms.valid = true;
    }
    timeline.synchronized = Clock::now();
    armed = false;
    ++step;
  }

  // Parameters the forward's outputs cannot reach contribute what they hold (accumulated by
  // no_sync steps) or zeros. They are marked at the first gradient of the backward, as PyTorch
  // does, not at forward time: with gradient_as_bucket_view their .grad is a bucket slot, and a
  // zero_grad(false) between forward and backward would write into a bucket whose all-reduce had
  // already started.
  void mark_unused_ready() {
    std::vector<int> todo;
    todo.swap(unused);
    for (int i : todo) mark_ready(i, params[static_cast<size_t>(i)].tensor.grad());
  }

  std::vector<std::string> unready() const {
    std::vector<std::string> names;
    for (const auto& p : params)
      if (!p.ready) names.push_back(p.name);
    return names;
  }

  void reset() {
    for (auto& p : params) p.ready = false;
    for (auto& b : buckets) {
      b.pending = static_cast<int>(b.params.size());
      b.work.reset();
    }
    ready_count = 0;
    next_launch = 0;
    unused.clear();
    timeline = DdpTimeline{};
    norms = GradNorms{};
  }
};

namespace {

std::string join(const std::vector<std::string>& v, size_t max = 12) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

// FNV-1a over the model's structure, to check that every rank wraps the same model.
int64_t signature(const nn::NamedTensors& params, const nn::NamedTensors& buffers) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ULL;
  };
  for (const auto* list : {&params, &buffers})
    for (const auto& [name, t] : *list) {
      mix(name.data(), name.size());
      mix(t.shape().data(), t.shape().size() * sizeof(int64_t));
      auto dt = static_cast<uint8_t>(t.dtype());
      mix(&dt, 1);
    }
  return static_cast<int64_t>(h);
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(nn::Module& module, Communicator& comm, DdpOptions opts)
    : module_(module), comm_(comm), opts_(opts), reducer_(std::make_shared<Reducer>()) {
  EMBER_CHECK(opts.bucket_cap_mb > 0 && opts.first_bucket_cap_mb > 0,
              "DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be positive, got ",
              opts.bucket_cap_mb, " and ", opts.first_bucket_cap_mb);
  Reducer& r = *reducer_;
  r.comm = &comm;
  r.opts = opts;
  nn::NamedTensors named = module.named_parameters();
  nn::NamedTensors bufs = module.named_buffers();

  // Every tensor the reducer hands to the communicator lives on the communicator's device.
  const Device dev = comm.device();
  for (const auto* list : {&named, &bufs})
    for (const auto& [name, t] : *list)
      EMBER_CHECK(t.device() == dev, "DistributedDataParallel: '", name, "' is on ", t.device().str(), " but the ",
                  comm.backend(), " communicator moves tensors on ", dev.str(), "; move the model there (",
                  dev.is_cpu() ? "MPI ranks train on the CPU; GPU ranks need the NCCL backend" : "module.to(device)",
                  ") before wrapping it");

  // Same model everywhere, or a clear error (instead of a collective of mismatched sizes).
  Tensor sig = empty({1}, {.dtype = DType::Int64});
  sig.data_ptr<int64_t>()[0] = signature(named, bufs);
  Tensor all = empty({comm.size()}, {.dtype = DType::Int64, .device = dev});
  comm.all_gather(all, sig.to(dev), "model signature")->wait();
  std::vector<int64_t> sigs = all.to(Device::cpu()).to_vector<int64_t>();
  for (int q = 0; q < comm.size(); ++q)
    EMBER_CHECK(sigs[static_cast<size_t>(q)] == sigs[0], "DistributedDataParallel: rank ", q,
                "'s model differs from rank 0's (parameter and buffer names, shapes or dtypes); every rank must "
                "wrap the same model");

  // Rank 0's values everywhere.
  std::vector<WorkPtr> works;
  for (const auto* list : {&named, &bufs})
    for (const auto& [name, t] : *list) {
      EMBER_CHECK(t.is_contiguous(), "DistributedDataParallel: '", name, "' is not contiguous");
      works.push_back(comm.broadcast(t.detach(), 0, "initial " + name));
    }
  for (auto& w : works) w->wait();

  // Buckets: reverse registration order, one dtype per bucket, a small first bucket.
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    if (!it->second.requires_grad()) continue;
    r.params.push_back({it->first, it->second});
  }
  EMBER_CHECK(!r.params.empty(), "DistributedDataParallel: the module has no parameter that requires a gradient");
  std::vector<std::pair<int64_t, DType>> open;  // per bucket: bytes so far, dtype
  for (size_t i = 0; i < r.params.size(); ++i) {
    Reducer::Param& p = r.params[i];
    // The bucket being filled is the first one (small cap) or a later one (full cap).
    double cap = (r.buckets.size() <= 1 ? opts.first_bucket_cap_mb : opts.bucket_cap_mb) * 1024 * 1024;
    int64_t bytes = p.tensor.numel() * static_cast<int64_t>(p.tensor.itemsize());
    bool fits = !r.buckets.empty() && open.back().second == p.tensor.dtype() &&
                open.back().first + bytes <= static_cast<int64_t>(cap);
    if (!fits) {
      r.buckets.emplace_back();
      open.emplace_back(0, p.tensor.dtype());
    }
    p.bucket = static_cast<int>(r.buckets.size()) - 1;
    p.offset = open.back().first / static_cast<int64_t>(p.tensor.itemsize());
    open.back().first += bytes;
    r.buckets.back().params.push_back(static_cast<int>(i));
    r.index[p.tensor.impl()] = static_cast<int>(i);
  }
  for (size_t b = 0; b < r.buckets.size(); ++b) {
    DType dt = open[b].second;
    r.buckets[b].flat = empty({open[b].first / static_cast<int64_t>(itemsize(dt))}, {.dtype = dt, .device = dev});
  }
  r.reset();

  std::weak_ptr<Reducer> weak = reducer_;
  for (auto& p : r.params)
    p.tensor.register_post_accumulate_grad_hook([weak](const Tensor& leaf) {
      if (auto red = weak.lock()) red->on_grad(leaf.impl(), leaf);
    });
}

DistributedDataParallel::~DistributedDataParallel() {
  // Collectives still in flight write into buffers this object owns: let them land.
  for (auto& b : reducer_->buckets)
    if (b.work) try {
        b.work->wait();
      } catch (...) {
      }
}

void DistributedDataParallel::sync_buffers() {
  if (opts_.buffer_sync == BufferSync::None) return;
  std::vector<WorkPtr> works;
  for (const auto& [name, t] : module_.named_buffers()) {
    if (opts_.buffer_sync == BufferSync::Broadcast)
      works.push_back(comm_.broadcast(t.detach(), 0, "buffer " + name));
    else if (is_floating(t.dtype()))
      works.push_back(comm_.all_reduce(t.detach(), ReduceOp::Avg, "buffer " + name));
  }
  for (auto& w : works) w->wait();
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (module_.is_training()) sync_buffers();
  Tensor out = module_(input);
  prepare_for_backward({out});
  return out;
}

void DistributedDataParallel::prepare_for_backward(const std::vector<Tensor>& outputs) {
  Reducer& r = *reducer_;
  if (r.armed) {
    EMBER_FAIL("DistributedDataParallel: the previous step's gradient reduction did not finish: no gradient reached ",
               join(r.unready()),
               ". Every parameter must take part in the loss on every rank; pass find_unused_parameters = true "
               "if some do not, or call synchronize() before the next forward");
  }
  if (!sync_enabled_ || !GradMode::is_enabled()) return;
  r.reset();
  // Which parameters can the outputs reach? The others get no gradient in this backward.
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<std::shared_ptr<autograd::Node>> stack;
  for (const Tensor& o : outputs)
    if (o.defined() && o.requires_grad()) {
      auto e = autograd::gradient_edge(o);
      if (e.node) stack.push_back(e.node);
    }
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n.get())) reached.insert(acc->leaf().get());
    for (const auto& e : n->next_edges())
      if (e.node) stack.push_back(e.node);
  }
  std::vector<int> unused;
  for (size_t i = 0; i < r.params.size(); ++i)
    if (!reached.count(r.params[i].tensor.impl())) unused.push_back(static_cast<int>(i));
  if (!unused.empty() && !opts_.find_unused_parameters) {
    std::vector<std::string> names;
    for (int i : unused) names.push_back(r.params[static_cast<size_t>(i)].name);
    EMBER_FAIL("DistributedDataParallel: rank ", comm_.rank(),
               ": parameters not used to compute the outputs: ", join(names),
               ". Every rank must use every parameter in every step (a collective would wait for "
               "them forever); pass find_unused_parameters = true to let them contribute zeros");
  }
  r.armed = true;
  r.unused = unused;
  // No parameter reachable: no gradient hook will run, so they are all marked now.
  if (unused.size() == r.params.size()) {
    r.mark_unused_ready();
    r.finish();
  }
}

void DistributedDataParallel::synchronize() {
  Reducer& r = *reducer_;
  if (!r.armed) return;
  std::vector<std::string> missing = r.unready();
  if (!missing.empty() && !opts_.find_unused_parameters) {
    // Still finish the collectives, so the other ranks are not left waiting, then report.
    for (size_t i = 0; i < r.params.size(); ++i)
      if (!r.params[i].ready) r.mark_ready(static_cast<int>(i), r.params[i].tensor.grad());
    r.finish();
    EMBER_FAIL("DistributedDataParallel: rank ", comm_.rank(), ": no gradient reached ", join(missing),
               " in this backward; pass find_unused_parameters = true if that is expected");
  }
  for (size_t i = 0; i < r.params.size(); ++i)
    if (!r.params[i].ready) r.mark_ready(static_cast<int>(i), r.params[i].tensor.grad());
  r.finish();
}

std::vector<DistributedDataParallel::BucketInfo> DistributedDataParallel::bucket_layout() const {
  std::vector<BucketInfo> out;
  for (const auto& b : reducer_->buckets) {
    BucketInfo info;
    info.numel = b.flat.numel();
    info.dtype = b.flat.dtype();
    for (int pi : b.params) info.params.push_back(reducer_->params[static_cast<size_t>(pi)].name);
    out.push_back(std::move(info));
  }
  return out;
}

const DdpTimeline& DistributedDataParallel::last_timeline() const {
  return reducer_->timeline;
}
int64_t DistributedDataParallel::steps_synchronized() const {
  return reducer_->step;
}
const GradNorms& DistributedDataParallel::last_grad_norms() const {
  return reducer_->norms;
}

void DistributedDataParallel::set_loss_weight(double w) {
  EMBER_CHECK(std::isfinite(w) && w > 0, "DistributedDataParallel: a loss weight must be positive and finite, got ", w);
  reducer_->loss_weight = w;
}

}  // namespace ember::dist
