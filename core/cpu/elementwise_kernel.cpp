#include <cmath>

#include "core/cpu/loops.h"
#include "core/elementwise_kernels.h"

namespace ember {

EMBER_DEFINE_STUB(binary_stub, BinaryFn);
EMBER_DEFINE_STUB(unary_stub, UnaryFn);

namespace {

void cpu_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  EMBER_DISPATCH_NUMERIC(a.dtype(), "binary op", [&] {
    using T = scalar_t;
    const T al = static_cast<T>(alpha);
    switch (op) {
      case BinaryOp::Add:
        if (alpha == 1.0)
          cpu::map2<T, T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x + y); });
        else
          cpu::map2<T, T, T>(out, a, b, [al](T x, T y) { return static_cast<T>(x + al * y); });
        break;
      case BinaryOp::Sub:
        if (alpha == 1.0)
          cpu::map2<T, T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x - y); });
        else
          cpu::map2<T, T, T>(out, a, b, [al](T x, T y) { return static_cast<T>(x - al * y); });
        break;
      case BinaryOp::Mul:
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) { return static_cast<T>(x * y); });
        break;
      case BinaryOp::Div:
        if constexpr (std::is_integral_v<T>) {
          EMBER_FAIL("div: integer division is not supported; convert to a floating dtype first");
        } else {
          cpu::map2<T, T, T>(out, a, b, [](T x, T y) { return x / y; });
        }
        break;
    }
  });
}

void cpu_unary(UnaryOp op, const Tensor& out, const Tensor& a, double, double) {
  EMBER_DISPATCH_NUMERIC(a.dtype(), "unary op", [&] {
    using T = scalar_t;
    switch (op) {
      case UnaryOp::Neg:
        cpu::map1<T, T>(out, a, [](T x) { return static_cast<T>(-x); });
        break;
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(binary_stub, CPU, cpu_binary);
EMBER_REGISTER_KERNEL(unary_stub, CPU, cpu_unary);

}  // namespace ember
