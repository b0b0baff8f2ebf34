#include "dist/comm.h"

#include <atomic>

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

std::unique_ptr<Communicator> Communicator::split(int, int) {
  EMBER_FAIL(backend(), ": this backend cannot split its communicator into groups");
}

}  // namespace ember::dist
