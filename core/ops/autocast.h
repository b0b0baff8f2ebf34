// Automatic mixed precision: inside an `ember::autocast` scope the matrix products and
// convolutions run in bfloat16 or float16 while the numerically touchy ops (softmax, norms,
// reductions, exp/log/pow, the losses) run in float32, as torch.autocast does. Which op is which
// is one table, core/ops/autocast_table.h.
//
//   {
//     ember::autocast ac(Device::cpu(), DType::BFloat16);
//     Tensor loss = cross_entropy(model.forward(x), y);   // convs/linears in bf16, loss in fp32
//   }                                                     // leave the scope before backward()
//   loss.backward();                                      // parameters get float32 gradients
//
// The state is per thread and per device type. Scopes nest; `autocast(device, dtype, false)`
// turns autocast off inside an enabled scope (torch.autocast(enabled=False)), and leaving a scope
// restores what was in force before it. Parameters stay float32 (the master weights): an op casts
// its operands, and the cast is an autograd node, so gradients reach the parameters in float32.
// The 16-bit copy of a parameter (a leaf that requires grad) is made once per outermost scope and
// reused by every op that reads it (an RNN's weights at every layer call, a tied embedding),
// unless the parameter changed in place since (its version counter: an optimizer step), which
// makes a fresh copy. Backward runs with autocast off: gradients keep the forward's dtypes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/ops/autocast_table.h"
#include "core/tensor.h"

namespace ember {

enum class AutocastClass : uint8_t { LowPrecision, Float32, Promote };

#define EMBER_AUTOCAST_ENUM_(name, cls) name,
enum class AutocastOp : uint16_t { EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ENUM_) };
#undef EMBER_AUTOCAST_ENUM_

// The table's rows, in its order (tests walk them).
struct AutocastRow {
  AutocastOp op;
  const char* name;
  AutocastClass cls;
};
const std::vector<AutocastRow>& autocast_table();
AutocastClass autocast_class(AutocastOp op);
const char* autocast_class_name(AutocastClass c);  // "low precision", "float32", "promote"

// The scope guard. `dtype` must be BFloat16 or Float16 (an ember::Error otherwise). Not copyable.
class autocast {
 public:
  explicit autocast(Device device, DType dtype = DType::BFloat16, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
};

// Whether autocast is on for a device type on this thread, and the dtype it casts to.
bool autocast_enabled(DeviceType t);
DType autocast_dtype(DeviceType t);
// How many parameter casts the innermost scope's cache holds (tests check that a parameter is cast
// once per step); 0 outside any scope.
size_t autocast_cached_casts();
// Whether bfloat16 products run on AVX512-BF16 at the CPU level in use (else autocast says once
// that they run as conversions and float32 arithmetic).
bool autocast_bf16_is_native();

namespace detail {
// True while any autocast scope is enabled on this thread: the ops' fast test.
extern thread_local bool t_autocast_any;
// The operands of `op` as autocast wants them, or nothing when none changes (autocast off for
// their device, or already in the op's precision).
std::optional<std::vector<Tensor>> autocast_operands(AutocastOp op, std::vector<Tensor> operands);

// Turns autocast off for the scope (the autograd engine's backward pass), restoring it after.
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;

 private:
  std::array<bool, kNumDeviceTypes> prev_{};
  bool prev_any_ = false;
};
}  // namespace detail

// The hook at the top of every op in the table:
//   if (auto c = autocast_args(AutocastOp::conv2d, input, weight, bias)) return conv2d((*c)[0], (*c)[1], (*c)[2], p);
// Outside autocast it is one thread-local load; inside, the op calls itself again with the cast
// operands, which then pass through unchanged.
template <typename... T>
std::optional<std::array<Tensor, sizeof...(T)>> autocast_args(AutocastOp op, const T&... operands) {
  if (!detail::t_autocast_any) return std::nullopt;
  auto cast = detail::autocast_operands(op, {operands...});
  if (!cast) return std::nullopt;
  std::array<Tensor, sizeof...(T)> out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move((*cast)[i]);
  return out;
}

}  // namespace ember
