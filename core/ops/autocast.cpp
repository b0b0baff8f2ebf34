#include "core/ops/autocast.h"

#include <cstdio>
#include <memory>
#include <mutex>

#include "core/autograd/grad_mode.h"
#include "core/cpu_capability.h"

namespace ember {

namespace {

// A parameter's 16-bit copy, valid while the parameter lives at the same version and grad mode
// (a copy made under NoGradGuard has no autograd node, so it cannot serve a recorded forward).
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  uint32_t version;
  DType dtype;
  bool grad_mode;
  Tensor cast;
};

struct AutocastState {
  std::array<bool, kNumDeviceTypes> enabled{};
  // PyTorch's defaults: bfloat16 on the CPU, float16 on GPUs.
  std::array<DType, kNumDeviceTypes> dtype{DType::BFloat16, DType::Float16, DType::Float16};
  int depth = 0;  // live guards, enabled or not: the cache lives while any does
  std::vector<CachedCast> cache;
};

thread_local AutocastState t_state;

void refresh_any() {
  bool any = false;
  for (bool e : t_state.enabled) any = any || e;
  detail::t_autocast_any = any;
}

bool is_16bit(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

// Where the CPU cannot multiply bfloat16 natively, autocast still works (conversions and float32
// arithmetic) but gains nothing: say so once per process.
void note_cpu_support_once(DType dtype) {
  static std::once_flag once;
  if (dtype != DType::BFloat16) return;
  std::call_once(once, [] {
    if (!autocast_bf16_is_native())
      std::fprintf(stderr,
                   "ember: autocast bfloat16 at a CPU level without AVX512-BF16: it runs as conversions and "
                   "float32 arithmetic (correct, not faster)\n");
  });
}

// A parameter's cast from the cache, made and cached on first use.
Tensor cached_cast(const Tensor& t, DType dtype) {
  const bool grad = GradMode::is_enabled();
  auto& cache = t_state.cache;
  for (size_t i = 0; i < cache.size(); ++i) {
    CachedCast& c = cache[i];
    if (c.source.expired()) {  // the parameter is gone: drop its copy
      cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(i--));
      continue;
    }
    if (c.source.lock().get() != t.impl() || c.dtype != dtype || c.grad_mode != grad) continue;
    if (c.version == t.version()) return c.cast;
    cache.erase(cache.begin() + static_cast<std::ptrdiff_t>(i));  // changed in place: recast
    break;
  }
  Tensor cast = t.to(dtype);
  cache.push_back({t.impl_ptr(), t.version(), dtype, grad, cast});
  return cast;
}

// The operand as an op of class `cls` wants it under target dtype `low`, or undefined when it
// stays as it is.
Tensor cast_operand(const Tensor& t, AutocastClass cls, DType low) {
  if (!t.defined() || !t.is_floating_point() || t.dtype() == DType::Float64) return {};
  if (!t_state.enabled[static_cast<int>(t.device().type)]) return {};
  if (cls == AutocastClass::LowPrecision && t.dtype() != low) {
    if (t.is_leaf() && t.requires_grad() && t_state.depth > 0) return cached_cast(t, low);
    return t.to(low);
  }
  if (cls == AutocastClass::Float32 && is_16bit(t.dtype())) return t.to(DType::Float32);
  return {};
}

}  // namespace

// The level the kernels run at decides, not the CPU's flags: under EMBER_CPU_CAPABILITY=avx512 on a
// CPU with AVX512-BF16 the bfloat16 GEMM takes its float32 fallback too. A native build's kernels
// use whatever -march=native gave them.
bool autocast_bf16_is_native() {
  const CpuCapability level = cpu_capability();
  if (level == CpuCapability::Native) {
    // Appended, not `" " + list + " "`: GCC 12's -Wrestrict misfires on that temporary.
    std::string flags = " ";
    flags += cpu_feature_list();
    flags += ' ';
    return flags.find(" avx512bf16 ") != std::string::npos;
  }
  return level >= CpuCapability::Avx512Bf16;
}

thread_local bool detail::t_autocast_any = false;

const std::vector<AutocastRow>& autocast_table() {
#define EMBER_AUTOCAST_ROW_(name, cls) {AutocastOp::name, #name, AutocastClass::cls},
  static const std::vector<AutocastRow> rows{EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ROW_)};
#undef EMBER_AUTOCAST_ROW_
  return rows;
}

AutocastClass autocast_class(AutocastOp op) {
  return autocast_table()[static_cast<size_t>(op)].cls;
}

const char* autocast_class_name(AutocastClass c) {
  switch (c) {
    case AutocastClass::LowPrecision:
      return "low precision";
    case AutocastClass::Float32:
      return "float32";
    case AutocastClass::Promote:
      return "promote";
  }
  return "?";
}

autocast::autocast(Device device, DType dtype, bool enabled) : type_(device.type) {
  EMBER_CHECK(is_16bit(dtype), "autocast: dtype ", dtype_name(dtype),
              " is not a low-precision type (expected bfloat16 or float16)");
  const int i = static_cast<int>(type_);
  prev_enabled_ = t_state.enabled[i];
  prev_dtype_ = t_state.dtype[i];
  t_state.enabled[i] = enabled;
  t_state.dtype[i] = dtype;
  ++t_state.depth;
  refresh_any();
  if (enabled && type_ == DeviceType::CPU) note_cpu_support_once(dtype);
}

autocast::~autocast() {
  const int i = static_cast<int>(type_);
  t_state.enabled[i] = prev_enabled_;
  t_state.dtype[i] = prev_dtype_;
  if (--t_state.depth == 0) t_state.cache.clear();  // the step is over: next step casts afresh
  refresh_any();
}

bool autocast_enabled(DeviceType t) {
  return t_state.enabled[static_cast<int>(t)];
}

DType autocast_dtype(DeviceType t) {
  return t_state.dtype[static_cast<int>(t)];
}

size_t autocast_cached_casts() {
  return t_state.cache.size();
}

std::optional<std::vector<Tensor>> detail::autocast_operands(AutocastOp op, std::vector<Tensor> operands) {
  const AutocastClass cls = autocast_class(op);
  if (cls == AutocastClass::Promote) return std::nullopt;
  bool changed = false;
  for (Tensor& t : operands) {
    if (!t.defined()) continue;
    Tensor c = cast_operand(t, cls, t_state.dtype[static_cast<int>(t.device().type)]);
    if (!c.defined()) continue;
    t = std::move(c);
    changed = true;
  }
  if (!changed) return std::nullopt;
  return operands;
}

detail::AutocastSuspend::AutocastSuspend() : prev_(t_state.enabled), prev_any_(t_autocast_any) {
  t_state.enabled.fill(false);
  t_autocast_any = false;
}

detail::AutocastSuspend::~AutocastSuspend() {
  t_state.enabled = prev_;
  t_autocast_any = prev_any_;
}

}  // namespace ember
