// The CUDA strided copy between two tensors of one dtype (core/cuda/copy_kernel.cu, behind
// .contiguous(), strided copy_ and every cross-layout copy on a GPU) run by the kernel emulator
// against the CPU copy: every element width, transposed, sliced, broadcast (zero-stride) sources
// and strided destinations, sizes that are not multiples of a block, and raw bits preserved
// (NaN payloads, -0), in all three thread orders; and the fill_ kernel (core/cuda/fill.cu).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/copy.h"
#include "core/cuda/copy_kernel.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;

namespace {

class Copy : public emu_test::EmulatedKernel {};

// Byte-for-byte equality of two tensors of one shape and dtype, element by element in
// row-major order (whatever their strides).
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  Tensor g = got.contiguous(), w = want.contiguous();
  const size_t bytes = static_cast<size_t>(g.numel()) * g.itemsize();
  EXPECT_EQ(std::memcmp(g.raw_data(), w.raw_data(), bytes), 0) << what;
}

// Random bit patterns of the dtype's width (NaNs with payloads, -0, subnormals included).
Tensor random_bits(Shape shape, DType dt) {
  Tensor bits = randint(0, 256, {numel_of(shape) * static_cast<int64_t>(itemsize(dt))}, {.dtype = DType::UInt8});
  Tensor out = empty(shape, {.dtype = dt});
  std::memcpy(out.raw_data(), bits.raw_data(), static_cast<size_t>(bits.numel()));
  if (dt == DType::Bool) out = randint(0, 2, shape, {.dtype = DType::Bool});  // a bool holds 0 or 1
  return out;
}

const std::vector<DType> kDtypes = {DType::UInt8, DType::Bool,    DType::Float16, DType::BFloat16,
                                    DType::Int32, DType::Float32, DType::Int64,   DType::Float64};

}  // namespace

TEST_P(Copy, StridedSourcesMatchTheCpuBitForBit) {
  for (DType dt : kDtypes) {
    Tensor base = random_bits({7, 33, 5}, dt);
    Tensor dev = device_copy(base);
    struct View {
      const char* name;
      Tensor cpu, gpu;
    };
    const std::vector<View> views = {
        {"transpose(0, 2)", base.transpose(0, 2), dev.transpose(0, 2)},
        {"permute(1, 2, 0)", base.permute({1, 2, 0}), dev.permute({1, 2, 0})},
        {"narrow(1, 3, 29)", base.narrow(1, 3, 29), dev.narrow(1, 3, 29)},
        {"select(2, 4)", base.select(2, 4), dev.select(2, 4)},
        {"broadcast [7, 1, 5] -> [7, 33, 5]", base.narrow(1, 2, 1).expand({7, 33, 5}),
         dev.narrow(1, 2, 1).expand({7, 33, 5})},
    };
    for (const View& v : views) {
      Tensor got = device_empty(v.cpu.shape(), dt);
      cuda::copy_same_dtype_on_device(got, v.gpu);
      expect_same_bits(got, v.cpu, std::string(dtype_name(dt)) + " " + v.name);
    }
  }
}

TEST_P(Copy, StridedDestinationsLeaveTheOtherElementsAlone) {
  for (DType dt : kDtypes) {
    Tensor base = random_bits({9, 300}, dt);  // 2,700 elements: more than a block, not a multiple
    Tensor src = random_bits({300, 9}, dt);
    Tensor want = base.clone();
    want.t().copy_(src);
    Tensor dev = device_copy(base);
    cuda::copy_same_dtype_on_device(dev.t(), device_copy(src));
    expect_same_bits(dev, want, std::string(dtype_name(dt)) + " into a transposed view");

    // Every other column of a destination, from a broadcast row.
    Tensor row = random_bits({1, 150}, dt);
    Tensor want2 = base.clone();
    want2.slice(1, 0, 300, 2).copy_(row.expand({9, 150}));
    Tensor dev2 = device_copy(base);
    cuda::copy_same_dtype_on_device(dev2.slice(1, 0, 300, 2), device_copy(row).expand({9, 150}));
    expect_same_bits(dev2, want2, std::string(dtype_name(dt)) + " into every other column");
  }
}

// fill_ (core/cuda/fill.cu): the value converted as the CPU converts it and written as raw bits,
// into contiguous tensors and strided views (the elements outside the view keep theirs).
TEST_P(Copy, FillMatchesTheCpuOnContiguousAndStridedTensors) {
  for (DType dt : kDtypes) {
    for (double v : {0.0, -0.0, 1.5, -3.0, 70000.0, 1e-8}) {
      Tensor base = random_bits({6, 301}, dt);
      Tensor want = base.clone();
      fill_stub(Device::cpu())(want, v);
      Tensor got = device_copy(base);
      emu::kernel(fill_stub)(got, v);
      expect_same_bits(got, want, std::string(dtype_name(dt)) + " fill " + std::to_string(v));

      Tensor want2 = base.clone();
      fill_stub(Device::cpu())(want2.t().slice(0, 1, 301, 3), v);
      Tensor got2 = device_copy(base);
      emu::kernel(fill_stub)(got2.t().slice(0, 1, 301, 3), v);
      expect_same_bits(got2, want2, std::string(dtype_name(dt)) + " strided fill " + std::to_string(v));
    }
  }
}

TEST_P(Copy, MismatchedOperandsAreAnError) {
  Tensor a = device_empty({4, 5}, DType::Float32);
  EXPECT_THROW(cuda::copy_same_dtype_on_device(a, device_empty({4, 5}, DType::Int32)), Error);
  EXPECT_THROW(cuda::copy_same_dtype_on_device(a, device_empty({5, 4}, DType::Float32)), Error);
  // An empty copy launches nothing.
  cuda::copy_same_dtype_on_device(device_empty({0, 3}, DType::Float32), device_empty({0, 3}, DType::Float32));
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Copy, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
