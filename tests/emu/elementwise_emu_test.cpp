// The CUDA elementwise kernels (core/cuda/elementwise.cu) run by the kernel emulator against the
// CPU kernels: every op of the binary, unary, activation and gradient families, float and integer
// dtypes, contiguous (vector loads, with and without a tail), misaligned, strided and broadcast
// operands, in all three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/elementwise_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class Elementwise : public emu_test::EmulatedKernel {};

Tensor random_of(Shape shape, DType dt, double lo = -3.0, double hi = 3.0) {
  if (is_floating(dt)) return (rand(shape, {.dtype = DType::Float64}) * (hi - lo) + lo).to(dt);
  return randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi) + 1, shape, {.dtype = dt});
}

// Operand layouts: each case gives the output shape and two inputs (views of device copies)
// whose shapes broadcast to it, plus the same views of the CPU originals.
struct Layout {
  std::string name;
  Shape out;
  Shape a, b;
  bool transpose_a = false;  // a is the transpose of a contiguous tensor
  int64_t misalign = 0;      // a starts this many elements into its buffer
};

std::vector<Layout> layouts() {
  return {
      {"contiguous_tail", {4099}, {4099}, {4099}},      {"contiguous_small", {7}, {7}, {7}},
      {"misaligned", {1001}, {1001}, {1001}, false, 1}, {"broadcast", {5, 6, 13}, {5, 1, 13}, {1, 6, 13}},
      {"scalar_operand", {3, 33}, {3, 33}, {1}},        {"transposed", {17, 9}, {17, 9}, {17, 9}, true},
  };
}

struct Operands {
  Tensor a_cpu, b_cpu, a_dev, b_dev;
};

Operands make_operands(const Layout& l, DType dt, double lo, double hi) {
  Operands o;
  Shape a_shape = l.a;
  if (l.transpose_a) a_shape = {l.a[1], l.a[0]};
  Tensor base = random_of({numel_of(a_shape) + l.misalign}, dt, lo, hi);
  Tensor dev = device_copy(base);
  auto view = [&](const Tensor& t) {
    Tensor v = t.narrow(0, l.misalign, numel_of(a_shape)).view(a_shape);
    if (l.transpose_a) v = v.t();
    return v.expand(l.out);
  };
  o.a_cpu = view(base);
  o.a_dev = view(dev);
  o.b_cpu = random_of(l.b, dt, lo, hi);
  o.b_dev = device_copy(o.b_cpu).expand(l.out);
  o.b_cpu = o.b_cpu.expand(l.out);
  return o;
}

double tol(DType dt) {
  return dt == DType::Float32 ? 2e-5 : (dt == DType::Float64 ? 1e-12 : 0.0);
}

const std::vector<BinaryOp> kBinaryOps = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul, BinaryOp::Div,
                                          BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Pow};

}  // namespace

TEST_P(Elementwise, BinaryOpsMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    for (const Layout& l : layouts()) {
      for (BinaryOp op : kBinaryOps) {
        if (op == BinaryOp::Div && !is_floating(dt)) continue;
        const bool pow = op == BinaryOp::Pow;
        const double lo = pow ? (is_floating(dt) ? 0.1 : 0.0) : (dt == DType::UInt8 ? 0.0 : -3.0);
        Operands o = make_operands(l, dt, lo, pow ? 3.0 : 9.0);
        for (double alpha : {1.0, 2.0}) {
          if (alpha != 1.0 && op != BinaryOp::Add && op != BinaryOp::Sub) continue;
          Tensor want = empty(l.out, {.dtype = dt});
          binary_stub(Device::cpu())(op, want, o.a_cpu, o.b_cpu, alpha);
          Tensor got = device_empty(l.out, dt);
          emu::kernel(binary_stub)(op, got, o.a_dev, o.b_dev, alpha);
          expect_close(got, want, tol(dt), 0.0,
                       std::string(dtype_name(dt)) + " " + l.name + " op " + std::to_string(static_cast<int>(op)));
        }
      }
    }
  }
}

TEST_P(Elementwise, BinaryInPlaceAliasesTheOutput) {
  Tensor a = random_of({1003}, DType::Float32), b = random_of({1003}, DType::Float32);
  Tensor want = empty({1003});
  binary_stub(Device::cpu())(BinaryOp::Mul, want, a, b, 1.0);
  Tensor ad = device_copy(a), bd = device_copy(b);
  emu::kernel(binary_stub)(BinaryOp::Mul, ad, ad, bd, 1.0);
  expect_close(ad, want, 1e-6, 0.0);
}

TEST_P(Elementwise, UnaryOpsMatchTheCpu) {
  struct Case {
    UnaryOp op;
    double p0, p1, lo, hi;
    bool ints;
  };
  const std::vector<Case> cases = {
      {UnaryOp::Neg, 0, 0, -3, 3, true},     {UnaryOp::Abs, 0, 0, -3, 3, true},
      {UnaryOp::Sign, 0, 0, -3, 3, true},    {UnaryOp::Square, 0, 0, -3, 3, true},
      {UnaryOp::Clamp, -1, 2, -3, 3, true},  {UnaryOp::Pow, 3, 0, -3, 3, true},
      {UnaryOp::Pow, 0.5, 0, 0.1, 3, false}, {UnaryOp::Pow, -2, 0, 0.1, 3, false},
      {UnaryOp::Pow, 1.7, 0, 0.1, 3, false}, {UnaryOp::Exp, 0, 0, -3, 3, false},
      {UnaryOp::Log, 0, 0, 0.1, 5, false},   {UnaryOp::Log1p, 0, 0, -0.5, 5, false},
      {UnaryOp::Sqrt, 0, 0, 0.1, 5, false},  {UnaryOp::Rsqrt, 0, 0, 0.1, 5, false},
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    for (const Case& c : cases) {
      if (!is_floating(dt) && !c.ints) continue;
      for (const Layout& l : {layouts()[0], layouts()[2], layouts()[5]}) {
        Operands o = make_operands(l, dt, c.lo, c.hi);
        Tensor want = empty(l.out, {.dtype = dt});
        unary_stub(Device::cpu())(c.op, want, o.a_cpu, c.p0, c.p1);
        Tensor got = device_empty(l.out, dt);
        emu::kernel(unary_stub)(c.op, got, o.a_dev, c.p0, c.p1);
        expect_close(
            got, want, 4 * tol(dt), 0.0,
            std::string(dtype_name(dt)) + " " + l.name + " unary op " + std::to_string(static_cast<int>(c.op)));
      }
    }
  }
}

TEST_P(Elementwise, ActivationsAndTheirGradientsMatchTheCpu) {
  struct Case {
    ActivationOp op;
    double p0, p1;
  };
  const std::vector<Case> cases = {{ActivationOp::Relu, 0, 0},     {ActivationOp::LeakyRelu, 0.1, 0},
                                   {ActivationOp::Elu, 1.5, 0},    {ActivationOp::Gelu, 0, 0},
                                   {ActivationOp::GeluTanh, 0, 0}, {ActivationOp::Sigmoid, 0, 0},
                                   {ActivationOp::Tanh, 0, 0},     {ActivationOp::Softplus, 2.0, 3.0}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      for (const Layout& l : {layouts()[0], layouts()[3]}) {
        Operands o = make_operands(l, dt, -4.0, 4.0);
        Tensor want = empty(l.out, {.dtype = dt});
        activation_stub(Device::cpu())(c.op, want, o.a_cpu, c.p0, c.p1);
        Tensor got = device_empty(l.out, dt);
        emu::kernel(activation_stub)(c.op, got, o.a_dev, c.p0, c.p1);
        const std::string what =
            std::string(dtype_name(dt)) + " " + l.name + " activation " + std::to_string(static_cast<int>(c.op));
        expect_close(got, want, 20 * tol(dt), 20 * tol(dt), what);
        // The backward reads the saved output for relu/sigmoid/tanh and the input otherwise.
        const bool from_y = activation_grad_uses_output(c.op);
        Tensor saved_cpu = from_y ? want : o.a_cpu, saved_dev = from_y ? device_copy(want) : o.a_dev;
        Tensor want_g = empty(l.out, {.dtype = dt});
        activation_grad_stub(Device::cpu())(c.op, want_g, o.b_cpu, saved_cpu, c.p0, c.p1);
        Tensor got_g = device_empty(l.out, dt);
        emu::kernel(activation_grad_stub)(c.op, got_g, o.b_dev, saved_dev, c.p0, c.p1);
        expect_close(got_g, want_g, 20 * tol(dt), 20 * tol(dt), what + " backward");
      }
    }
  }
  // Integer relu.
  Tensor a = random_of({300}, DType::Int32);
  Tensor want = empty({300}, {.dtype = DType::Int32});
  activation_stub(Device::cpu())(ActivationOp::Relu, want, a, 0, 0);
  Tensor got = device_empty({300}, DType::Int32);
  emu::kernel(activation_stub)(ActivationOp::Relu, got, device_copy(a), 0, 0);
  expect_close(got, want, 0, 0, "int relu");
}

TEST_P(Elementwise, UnaryAndBinaryGradientsMatchTheCpu) {
  const std::vector<UnaryGradOp> unary = {UnaryGradOp::Abs,    UnaryGradOp::Exp,   UnaryGradOp::Log,
                                          UnaryGradOp::Log1p,  UnaryGradOp::Sqrt,  UnaryGradOp::Rsqrt,
                                          UnaryGradOp::Square, UnaryGradOp::Clamp, UnaryGradOp::Pow};
  const std::vector<BinaryGradOp> binary = {BinaryGradOp::MaximumA,  BinaryGradOp::MaximumB, BinaryGradOp::MinimumA,
                                            BinaryGradOp::MinimumB,  BinaryGradOp::PowBase,  BinaryGradOp::PowExponent,
                                            BinaryGradOp::DivDivisor};
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Layout l = layouts()[3];
    Operands o = make_operands(l, dt, 0.2, 3.0);
    Tensor g = random_of(l.out, dt), gd = device_copy(g);
    for (UnaryGradOp op : unary) {
      for (double p0 : {0.5, 2.0, 2.5}) {
        Tensor want = empty(l.out, {.dtype = dt});
        unary_grad_stub(Device::cpu())(op, want, g, o.a_cpu, p0, 2.7);
        Tensor got = device_empty(l.out, dt);
        emu::kernel(unary_grad_stub)(op, got, gd, o.a_dev, p0, 2.7);
        expect_close(got, want, 10 * tol(dt), 0.0, "unary grad " + std::to_string(static_cast<int>(op)));
      }
    }
    // Ties for maximum/minimum: b equals a in some places.
    Tensor b_cpu = o.a_cpu.contiguous();
    b_cpu.slice(0, 0, 2).copy_(o.b_cpu.slice(0, 0, 2));
    Tensor b_dev = device_copy(b_cpu);
    for (BinaryGradOp op : binary) {
      Tensor want = empty(l.out, {.dtype = dt});
      binary_grad_stub(Device::cpu())(op, want, g, o.a_cpu, b_cpu);
      Tensor got = device_empty(l.out, dt);
      emu::kernel(binary_grad_stub)(op, got, gd, o.a_dev, b_dev);
      expect_close(got, want, 10 * tol(dt), 0.0, "binary grad " + std::to_string(static_cast<int>(op)));
    }
  }
}

TEST(ElementwiseErrors, IntegerDivisionIsRefused) {
  Tensor a = device_copy(random_of({4}, DType::Int32));
  test_util::expect_error([&] { emu::kernel(binary_stub)(BinaryOp::Div, a, a, a, 1.0); }, "div", "integer operands");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Elementwise, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
