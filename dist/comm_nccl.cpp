// Status: run with one rank on a lent H200 (2026-12-04, gpu.nccl_np1 through scripts/gpu-check.sh);
// two ranks (two on one GPU, scripts/gpu-check.sh's "nccl (2 ranks)"), exchange() and the naming
// of the incomplete operation when a peer is lost have never run (see comm_nccl.h and
// tests/gpu/nccl_test.cpp).
#include "dist/comm_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "core/ops.h"
#include "core/stream.h"
#include "dist/device_watchdog.h"

namespace ember::dist {
namespace {

void check_nccl(ncclResult_t r, const std::string& what) {
  EMBER_CHECK(r == ncclSuccess, what, ": NCCL failed: ", ncclGetErrorString(r));
}

void check_cuda(cudaError_t e, const std::string& what) {
  EMBER_CHECK(e == cudaSuccess, what, ": CUDA failed: ", cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Int32:
      return ncclInt32;
    case DType::Int64:
      return ncclInt64;
    case DType::UInt8:
    case DType::Bool:
      return ncclUint8;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(DType t, ReduceOp op) {
  if (t == DType::Bool) return ncclMax;  // sum of bools is logical or, as in the MPI backend
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

// Completion is an event on the communication stream; waiting makes the compute stream wait.
class NcclWork final : public Work {
 public:
  NcclWork(std::string what, std::shared_ptr<Event> done, Stream& compute, std::vector<Tensor> keep,
           bool host_waits = false)
      : Work(std::move(what)),
        done_(std::move(done)),
        compute_(compute),
        keep_(std::move(keep)),
        host_waits_(host_waits) {}
  // A handle dropped without wait() still orders the compute stream after the collective: the
  // caching allocator hands the tensors' memory to the next compute-stream allocation once they
  // are released here, and NCCL may still be writing it.
  ~NcclWork() override {
    if (completed_by_wait_) return;
    try {
      compute_.wait(*done_);
    } catch (...) {  // a failing device; nothing a destructor can do about it
    }
  }
  void wait() override {
    compute_.wait(*done_);
    if (host_waits_) done_->synchronize();
    completed_by_wait_ = true;
    finish();
  }
  bool completed() const override { return done_->query(); }

 private:
  std::shared_ptr<Event> done_;  // shared with Impl::in_flight
  Stream& compute_;
  std::vector<Tensor> keep_;  // the tensors stay alive until the work is dropped
  bool completed_by_wait_ = false;
  bool host_waits_ = false;
};

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  Stream* compute = nullptr;
  Stream* comm_stream = nullptr;
  Device device;

  // The operations queued and not yet seen complete, oldest first: what a rank that gives up
  // because it lost another names (dist/comm.h, register_device_work), since a rank blocked on a
  // collective whose peer died waits in a stream synchronisation, not in this communicator.
  struct InFlight {
    int64_t seq;
    std::string what;
    std::shared_ptr<Event> done;
    std::chrono::steady_clock::time_point queued;
  };
  std::mutex mu;
  std::deque<InFlight> in_flight;
  int64_t seq = 0;
  std::unique_ptr<DeviceWatchdog> watchdog;  // started once comm is made

  Impl() {
    register_device_work(this, [this] { return oldest_incomplete(); });
  }
  ~Impl() { unregister_device_work(this); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Drops the completed operations at the front (mu held).
  void drop_completed() {
    while (!in_flight.empty() && in_flight.front().done->query()) in_flight.pop_front();
  }
  std::optional<DeviceWatchdog::Pending> oldest_pending() {
    std::lock_guard<std::mutex> lock(mu);
    drop_completed();
    if (in_flight.empty()) return std::nullopt;
    const InFlight& f = in_flight.front();
    const std::chrono::duration<double> age = std::chrono::steady_clock::now() - f.queued;
    return DeviceWatchdog::Pending{detail::concat("NCCL #", f.seq, " ", f.what, " (queued on ", device, " ",
                                                  static_cast<int>(age.count()), " s ago, not complete)"),
                                   age.count()};
  }
  std::string oldest_incomplete() {
    const auto p = oldest_pending();
    return p ? p->what : "";
  }

  // The watchdog for rank `rank` of `size`: on an NCCL error, or an operation incomplete past
  // EMBER_NCCL_TIMEOUT_SECONDS (default 600: a healthy job's collectives take far less, and a
  // lost peer's never end), it says why, aborts the communicator and exits with kPeerLostExit.
  void start_watchdog(int rank, int size) {
    DeviceWatchdog::Hooks h;
    h.oldest_incomplete = [this] { return oldest_pending(); };
    h.async_error = [this] {
      ncclResult_t st = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &st) != ncclSuccess) return std::string("ncclCommGetAsyncError failed");
      return st == ncclSuccess || st == ncclInProgress ? std::string() : std::string(ncclGetErrorString(st));
    };
    h.fire = [this, rank, size](const std::string& why) {
      const std::string msg = detail::concat("ember dist: rank ", rank, " of ", size, " (NCCL): ", why,
                                             "\n  aborting the NCCL communicator and exiting with status ",
                                             kPeerLostExit, " instead of hanging\n");
      std::fputs(msg.c_str(), stderr);
      std::fflush(stderr);
      std::fflush(stdout);
      ncclCommAbort(comm);  // ends this rank's kernels waiting on the peer
      std::_Exit(kPeerLostExit);
    };
    watchdog = std::make_unique<DeviceWatchdog>(std::move(h), DeviceWatchdog::timeout_from_env(600.0));
  }

  // Orders the communication stream after the compute stream's queued work, runs `launch` on it
  // and returns the handle of its completion.
  template <typename F>
  WorkPtr run(std::string what, std::vector<Tensor> keep, F&& launch, bool host_waits = false) {
    check_cuda(cudaSetDevice(device.index), what);
    auto ready = make_event(device);
    ready->record(*compute);
    comm_stream->wait(*ready);
    auto stream = static_cast<cudaStream_t>(comm_stream->native_handle());
    check_nccl(launch(stream), what);
    std::shared_ptr<Event> done = make_event(device);
    done->record(*comm_stream);
    {
      std::lock_guard<std::mutex> lock(mu);
      drop_completed();
      in_flight.push_back({++seq, what, done, std::chrono::steady_clock::now()});
    }
    auto w = std::make_shared<NcclWork>(std::move(what), std::move(done), *compute, std::move(keep), host_waits);
    w->mark_started();
    return w;
  }
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap) : impl_(std::make_unique<Impl>()) {
  rank_ = bootstrap.rank();
  size_ = bootstrap.size();
  local_rank_ = bootstrap.local_rank();
  local_size_ = bootstrap.local_size();
  const int devices = cuda_device_count();
  EMBER_CHECK(node_has_devices_for(local_rank_ + 1), "NcclCommunicator: local rank ", local_rank_,
              " needs device cuda:", local_rank_, " but this node has ", devices,
              " CUDA device(s); start at most one rank per device (or, with NCCL >= 2.30, set "
              "NCCL_MULTI_RANK_GPU_ENABLE=1 to share them)");
  device_ = Device::cuda(local_rank_ % devices);
  impl_->device = device_;
  check_cuda(cudaSetDevice(device_.index), "NcclCommunicator");
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "NcclCommunicator: ncclGetUniqueId");
  Tensor buf = empty({static_cast<int64_t>(sizeof(id))}, {.dtype = DType::UInt8});
  std::memcpy(buf.raw_data(), &id, sizeof(id));
  bootstrap.broadcast(buf, 0, "nccl unique id")->wait();
  std::memcpy(&id, buf.raw_data(), sizeof(id));
  check_nccl(ncclCommInitRank(&impl_->comm, size_, id, rank_), "NcclCommunicator: ncclCommInitRank");
  impl_->compute = &get_stream(device_, StreamKind::Compute);
  impl_->comm_stream = &get_stream(device_, StreamKind::Communication);
  impl_->start_watchdog(rank_, size_);
}

bool NcclCommunicator::ranks_share_gpus() {
  const char* v = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  return v && std::string(v) == "1";
}

bool NcclCommunicator::node_has_devices_for(int local_size) {
  const int devices = cuda_device_count();
  return devices >= local_size || (devices > 0 && ranks_share_gpus());
}

int NcclCommunicator::runtime_version() {
  int v = 0;
  check_nccl(ncclGetVersion(&v), "ncclGetVersion");
  return v;
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_->comm) {
    impl_->comm_stream->synchronize();  // the watchdog still watches: a lost peer would hang it
    impl_->watchdog.reset();
    ncclCommDestroy(impl_->comm);
  }
}

WorkPtr NcclCommunicator::all_reduce(Tensor t, ReduceOp op, std::string label) {
  check_tensor(t, "all_reduce", device_);
  check_reducible(t, op, "all_reduce");
  void* p = t.raw_data();
  auto n = static_cast<size_t>(t.numel());
  auto dt = t.dtype();
  return impl_->run(describe("all_reduce", t, label, reduce_op_name(op)), {t}, [&](cudaStream_t s) {
    return ncclAllReduce(p, p, n, nccl_type(dt), nccl_op(dt, op), impl_->comm, s);
  });
}

WorkPtr NcclCommunicator::broadcast(Tensor t, int root, std::string label) {
  check_tensor(t, "broadcast", device_);
  EMBER_CHECK(root >= 0 && root < size_, "broadcast: root must be a rank in [0, ", size_, "), got ", root);
  void* p = t.raw_data();
  auto n = static_cast<size_t>(t.numel());
  auto dt = t.dtype();
  return impl_->run(describe("broadcast", t, label), {t},
                    [&](cudaStream_t s) { return ncclBroadcast(p, p, n, nccl_type(dt), root, impl_->comm, s); });
}

WorkPtr NcclCommunicator::all_gather(Tensor out, Tensor in, std::string label) {
  check_tensor(out, "all_gather output", device_);
  check_tensor(in, "all_gather input", device_);
  EMBER_CHECK(out.dtype() == in.dtype(), "all_gather: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(out.numel() == in.numel() * size_,
              "all_gather: the output needs size() * input elements = ", in.numel() * size_, ", got ", out.numel());
  return impl_->run(describe("all_gather", in, label), {out, in}, [&](cudaStream_t s) {
    return ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()),
                         impl_->comm, s);
  });
}

WorkPtr NcclCommunicator::reduce_scatter(Tensor out, Tensor in, ReduceOp op, std::string label) {
  check_tensor(out, "reduce_scatter output", device_);
  check_tensor(in, "reduce_scatter input", device_);
  check_reducible(in, op, "reduce_scatter");
  EMBER_CHECK(out.dtype() == in.dtype(), "reduce_scatter: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(in.numel() == out.numel() * size_,
              "reduce_scatter: the input needs size() * output elements = ", out.numel() * size_, ", got ", in.numel());
  return impl_->run(describe("reduce_scatter", in, label, reduce_op_name(op)), {out, in}, [&](cudaStream_t s) {
    return ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                             nccl_op(in.dtype(), op), impl_->comm, s);
  });
}

WorkPtr NcclCommunicator::send(Tensor t, int dst, int tag) {
  check_tensor(t, "send", device_);
  EMBER_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send: expected another rank in [0, ", size_, "), got ", dst);
  // NCCL matches point-to-point transfers by order, not by tag.
  (void)tag;
  return impl_->run(describe("send", t, ""), {t}, [&](cudaStream_t s) {
    return ncclSend(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), dst, impl_->comm, s);
  });
}

WorkPtr NcclCommunicator::recv(Tensor t, int src, int tag) {
  check_tensor(t, "recv", device_);
  EMBER_CHECK(src >= 0 && src < size_ && src != rank_, "recv: expected another rank in [0, ", size_, "), got ", src);
  (void)tag;
  return impl_->run(describe("recv", t, ""), {t}, [&](cudaStream_t s) {
    return ncclRecv(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), src, impl_->comm, s);
  });
}

// One ncclGroupStart/End on the communication stream: NCCL starts every transfer of the group
// together, so two ranks sending to each other (1F1B's gradient going back while the next
// activation comes forward) proceed at once instead of each waiting for the other's receive.
WorkPtr NcclCommunicator::exchange(std::vector<P2POp> ops, std::string label) {
  check_exchange(ops, rank_, size_, device_);
  std::vector<Tensor> keep;
  for (const P2POp& op : ops) keep.push_back(op.t);
  return impl_->run(describe_group(ops, label), std::move(keep), [&](cudaStream_t s) {
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    for (const P2POp& op : ops) {  // every call is made, so that the group is always ended
      const auto n = static_cast<size_t>(op.t.numel());
      const ncclResult_t r = op.kind == P2POp::Send
                                 ? ncclSend(op.t.raw_data(), n, nccl_type(op.t.dtype()), op.peer, impl_->comm, s)
                                 : ncclRecv(op.t.raw_data(), n, nccl_type(op.t.dtype()), op.peer, impl_->comm, s);
      if (first == ncclSuccess) first = r;
    }
    const ncclResult_t end = ncclGroupEnd();
    return first != ncclSuccess ? first : end;
  });
}

WorkPtr NcclCommunicator::barrier(std::string label) {
  Tensor one = empty({1}, {.dtype = DType::Float32, .device = device_});
  void* p = one.raw_data();
  return impl_->run(
      describe("barrier", Tensor(), label), {one},
      [&](cudaStream_t s) { return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, impl_->comm, s); }, true);
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size, int local_rank, int local_size,
                                   Device device)
    : rank_(rank),
      size_(size),
      local_rank_(local_rank),
      local_size_(local_size),
      device_(device),
      impl_(std::move(impl)) {}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  EMBER_CHECK(color >= 0, "split: expected a colour >= 0, got ", color);
  check_cuda(cudaSetDevice(device_.index), "split");
  // Whatever this rank queued on the parent must be ordered before the group's first operation:
  // both share the device's communication stream, which runs them in the order issued.
  auto impl = std::make_unique<Impl>();
  impl->device = device_;
  impl->compute = impl_->compute;
  impl->comm_stream = impl_->comm_stream;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  check_nccl(ncclCommSplit(impl_->comm, color, key, &impl->comm, &config), "split: ncclCommSplit");
  int rank = 0, size = 0;
  check_nccl(ncclCommUserRank(impl->comm, &rank), "split: ncclCommUserRank");
  check_nccl(ncclCommCount(impl->comm, &size), "split: ncclCommCount");
  impl->start_watchdog(rank, size);
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(impl), rank, size, local_rank_, local_size_, device_));
}

}  // namespace ember::dist
