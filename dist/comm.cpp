#include "dist/comm.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

#include "core/error.h"

namespace ember::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

std::atomic<int>& Work::blocked_waiters() {
  static std::atomic<int> n{0};
  return n;
}

void Work::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!done_) {
    blocked_waiters().fetch_add(1, std::memory_order_relaxed);
    cv_.wait(lk, [&] { return done_; });
    blocked_waiters().fetch_sub(1, std::memory_order_relaxed);
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::completed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return done_;
}

Clock::time_point Work::started() const {
  std::lock_guard<std::mutex> lk(mu_);
  return started_;
}

Clock::time_point Work::finished() const {
  std::lock_guard<std::mutex> lk(mu_);
  return finished_;
}

void Work::mark_started() {
  std::lock_guard<std::mutex> lk(mu_);
  started_ = Clock::now();
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (done_) return;
    if (started_ == Clock::time_point{}) started_ = Clock::now();
    finished_ = Clock::now();
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

void check_tensor(const Tensor& t, const char* what, Device device) {
  EMBER_CHECK(t.defined(), what, ": expected a defined tensor");
  EMBER_CHECK(t.is_contiguous(), what, ": expected a contiguous tensor (got shape ", shape_str(t.shape()),
              " with non-contiguous strides); call .contiguous() first");
  EMBER_CHECK(t.device() == device, what, ": expected a tensor on ", device.str(), ", got one on ", t.device().str());
}

void check_reducible(const Tensor& t, ReduceOp op, const char* what) {
  EMBER_CHECK(op != ReduceOp::Avg || is_floating(t.dtype()), what,
              ": the avg reduction needs a floating-point tensor, got ", dtype_name(t.dtype()),
              " (use sum and divide)");
}

std::string describe(const char* op, const Tensor& t, const std::string& label, const char* extra) {
  std::string s = op;
  if (extra) s += std::string(" ") + extra;
  if (!label.empty()) s += " '" + label + "'";
  if (t.defined()) s += " (" + std::to_string(t.numel()) + " " + dtype_name(t.dtype()) + ")";
  return s;
}

namespace {

// The handle of a group: waits for each member, and fails with the first member's failure.
class GroupWork final : public Work {
 public:
  GroupWork(std::string what, std::vector<WorkPtr> members) : Work(std::move(what)), members_(std::move(members)) {
    mark_started();
  }
  void wait() override {
    if (!Work::completed()) {  // finished once, however often it is waited for
      std::exception_ptr first;
      for (auto& w : members_) {  // every member is waited for, so none is left running unseen
        try {
          w->wait();
        } catch (...) {
          if (!first) first = std::current_exception();
        }
      }
      finish(first);
    }
    Work::wait();
  }
  bool completed() const override {
    for (const auto& w : members_)
      if (!w->completed()) return false;
    return true;
  }

 private:
  std::vector<WorkPtr> members_;
};

}  // namespace

void check_exchange(const std::vector<P2POp>& ops, int rank, int size, Device device) {
  EMBER_CHECK(!ops.empty(), "exchange: expected at least one transfer");
  for (const P2POp& op : ops) {
    const char* what = op.kind == P2POp::Send ? "exchange send" : "exchange recv";
    check_tensor(op.t, what, device);
    EMBER_CHECK(op.peer >= 0 && op.peer < size && op.peer != rank, what, ": expected another rank in [0, ", size,
                "), got ", op.peer);
  }
}

std::string describe_group(const std::vector<P2POp>& ops, const std::string& label) {
  int64_t sent = 0, received = 0;
  for (const P2POp& op : ops) (op.kind == P2POp::Send ? sent : received) += op.t.defined() ? op.t.numel() : 0;
  std::string s = "exchange";
  if (!label.empty()) s += " '" + label + "'";
  return s + " (" + std::to_string(ops.size()) + " transfers: " + std::to_string(sent) + " elements sent, " +
         std::to_string(received) + " received)";
}

WorkPtr Communicator::exchange(std::vector<P2POp> ops, std::string label) {
  check_exchange(ops, rank(), size(), device());
  std::string what = describe_group(ops, label);
  std::vector<WorkPtr> members;
  members.reserve(ops.size());
  for (P2POp& op : ops)
    members.push_back(op.kind == P2POp::Send ? send(std::move(op.t), op.peer, op.tag)
                                             : recv(std::move(op.t), op.peer, op.tag));
  return std::make_shared<GroupWork>(std::move(what), std::move(members));
}

std::unique_ptr<Communicator> Communicator::split(int, int) {
  EMBER_FAIL(backend(), ": this backend cannot split its communicator into groups");
}

namespace {

struct DeviceWorkRegistry {
  std::mutex mu;
  std::vector<std::pair<const void*, std::function<std::string()>>> owners;
};

DeviceWorkRegistry& device_work() {
  static DeviceWorkRegistry* r = new DeviceWorkRegistry;  // never destroyed: a rank may give up at exit
  return *r;
}

}  // namespace

void register_device_work(const void* owner, std::function<std::string()> oldest_incomplete) {
  DeviceWorkRegistry& r = device_work();
  std::lock_guard<std::mutex> lock(r.mu);
  r.owners.emplace_back(owner, std::move(oldest_incomplete));
}

void unregister_device_work(const void* owner) {
  DeviceWorkRegistry& r = device_work();
  std::lock_guard<std::mutex> lock(r.mu);
  std::erase_if(r.owners, [owner](const auto& o) { return o.first == owner; });
}

std::vector<std::string> incomplete_device_work() {
  DeviceWorkRegistry& r = device_work();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& o : r.owners)
    if (std::string d = o.second(); !d.empty()) out.push_back(std::move(d));
  return out;
}

}  // namespace ember::dist
