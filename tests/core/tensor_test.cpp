// Tensor metadata, views, copies, conversion and creation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

TEST(Tensor, ZerosHaveShapeAndValues) {
  Tensor t = zeros({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.is_contiguous());
  for (float v : t.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, CreationFunctions) {
  EXPECT_EQ(ones({3}, {.dtype = DType::Int32}).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(full({2}, 2.5).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25, {}).to_vector<float>(), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(linspace(0, 1, 5).to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(scalar_tensor(3.0).dim(), 0);
  EXPECT_EQ(scalar_tensor(3.0).item(), 3.0);
  Tensor z = zeros_like(ones({2, 2}, {.dtype = DType::Float64}));
  EXPECT_EQ(z.dtype(), DType::Float64);
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).shape(), (Shape{2, 2}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
}

TEST(Tensor, CreationErrors) {
  EXPECT_NE(error_of([] { zeros({2, -1}); }).find("negative size"), std::string::npos);
  EXPECT_NE(error_of([] { arange(0, 5, 0); }).find("arange"), std::string::npos);
  EXPECT_NE(error_of([] { tensor({{1, 2}, {3}}); }).find("rows"), std::string::npos);
  EXPECT_NE(error_of([] { from_vector(std::vector<float>{1, 2, 3}, {2, 2}); }).find("from_vector"), std::string::npos);
  EXPECT_NE(error_of([] { ones({2}).item(); }).find("item"), std::string::npos);
  EXPECT_NE(error_of([] { ones({2}, {.dtype = DType::Int64}).requires_grad_(); }).find("floating"), std::string::npos);
  EXPECT_NE(error_of([] { Device("gpu"); }).find("gpu"), std::string::npos);
}

TEST(Tensor, DeviceParsing) {
  EXPECT_EQ(Device("cpu"), Device::cpu());
  EXPECT_EQ(Device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device("cuda").str(), "cuda:0");
  EXPECT_THROW(Device("cuda:x"), Error);
  EXPECT_THROW(Device("cuda:-1"), Error);
  EXPECT_EQ(Device::best(), Device::cpu());  // no GPU on the CI machine
  // The test-only emulated device parses, but exists only where the kernel emulator is linked.
  EXPECT_EQ(Device("emu"), Device(DeviceType::Emulated, 0));
  EXPECT_EQ(Device("emu").str(), "emu");
  EXPECT_THROW(Device("emu:1"), Error);
  EXPECT_NE(error_of([] { empty({2}, {.device = Device("emu")}); }).find("kernel emulator"), std::string::npos);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor a = arange(0, 12, 1, {}).reshape({3, 4});
  Tensor v = a.view({4, 3});
  v.select(0, 0).fill_(-1);
  EXPECT_EQ(a.to_vector<float>()[0], -1.0f);
  EXPECT_EQ(a.to_vector<float>()[2], -1.0f);
  EXPECT_EQ(a.to_vector<float>()[3], 3.0f);
  EXPECT_EQ(a.storage(), v.storage());
}

TEST(Tensor, TransposePermuteSliceSelect) {
  Tensor a = arange(0, 24, 1, {}).reshape({2, 3, 4});
  Tensor t = a.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<float>()[1], 12.0f);  // t[0,0,1] = a[1,0,0]
  Tensor p = a.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(p.contiguous().to_vector<float>()[1], 12.0f);
  Tensor s = a.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.contiguous().to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(a.select(1, -1).contiguous().to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(a.narrow(0, 1, 1).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(a[1][2].contiguous().to_vector<float>(), (std::vector<float>{20, 21, 22, 23}));
  EXPECT_EQ(a.slice(0, -1, 100).shape(), (Shape{1, 3, 4}));  // clamped like Python
}

TEST(Tensor, ReshapeFlattenSqueezeUnsqueezeExpand) {
  Tensor a = arange(0, 6, 1, {});
  EXPECT_EQ(a.reshape({2, -1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(a.reshape({2, 3}).t().reshape({6}).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(a.reshape({1, 2, 1, 3}).squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(a.reshape({1, 2, 1, 3}).squeeze(2).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{6, 1}));
  EXPECT_EQ(a.reshape({2, 3, 1}).flatten(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(a.unflatten(0, {3, -1}).shape(), (Shape{3, 2}));
  Tensor e = tensor({1, 2}).reshape({2, 1}).expand({-1, 3});
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_EQ(e.contiguous().to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(tensor({5}).expand({2, 2}).contiguous().to_vector<float>(), (std::vector<float>{5, 5, 5, 5}));
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(s.reshape({1, 1}).shape(), (Shape{1, 1}));
}

TEST(Tensor, ViewErrors) {
  Tensor a = zeros({2, 3});
  EXPECT_NE(error_of([&] { a.view({4, 2}); }).find("invalid for input of size 6"), std::string::npos);
  EXPECT_NE(error_of([&] { a.t().view({6}); }).find("reshape"), std::string::npos);
  EXPECT_NE(error_of([&] { a.reshape({-1, -1}); }).find("only one dimension"), std::string::npos);
  EXPECT_NE(error_of([&] { a.transpose(0, 2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { a.permute({0, 0}); }).find("twice"), std::string::npos);
  EXPECT_NE(error_of([&] { a.select(0, 2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { a.narrow(1, 2, 2); }).find("out of bounds"), std::string::npos);
  EXPECT_NE(error_of([&] { a.expand({4, 3}); }).find("must match"), std::string::npos);
  EXPECT_NE(error_of([&] { a.expand({3}); }).find("fewer dims"), std::string::npos);
  EXPECT_NE(error_of([&] { a.slice(0, 0, 1, 0); }).find("step"), std::string::npos);
  EXPECT_NO_THROW(a.t().reshape({6}));
}

TEST(Tensor, CopyCastsAndBroadcasts) {
  Tensor d = zeros({2, 3}, {.dtype = DType::Float64});
  d.copy_(tensor({1.5, 2.5, -3.5}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.5, 2.5, -3.5, 1.5, 2.5, -3.5}));
  EXPECT_EQ(d.to(DType::Int32).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, -3, 1, 2, -3}));
  EXPECT_EQ(d.to(DType::Bool).to(DType::UInt8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));
  Tensor t = zeros({3, 2});
  t.t().copy_(d);  // write through a transposed view
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 2.5f, 2.5f, -3.5f, -3.5f}));
  EXPECT_THROW(t.copy_(zeros({4})), Error);
  Tensor c = d.clone();
  c.fill_(7);
  EXPECT_EQ(d.to_vector<double>()[0], 1.5);
}

// A row repeated over leading dims (a bias broadcast, as addmm copies it) goes by one memcpy per
// row when the row is at least 64 bytes: checked against the values for rows on both sides of
// that size, leading dims of size 1 and a middle broadcast dim, and a source that is a row of
// the destination itself (which must not take the memcpy path's aliasing).
TEST(Tensor, CopyOfARepeatedRowFillsEveryRow) {
  for (int64_t n : {3, 15, 16, 17, 40}) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
      std::vector<double> row(n);
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<double>(i * 3 - 7);
      const Tensor src = from_vector(row, {n}, TensorOptions{.dtype = dt});
      for (const Shape& shape : {Shape{5, n}, Shape{1, 4, n}, Shape{3, 1, n}, Shape{2, 3, n}}) {
        Tensor d = zeros(shape, {.dtype = dt});
        d.copy_(src);
        const std::vector<double> got = d.to_vector<double>();
        for (size_t k = 0; k < got.size(); ++k)
          ASSERT_EQ(got[k], row[k % n]) << "n " << n << " dtype " << dtype_name(dt) << " element " << k;
      }
    }
  }
  // Every row of m becomes its own first row, read through a broadcast view of that row.
  Tensor m = arange(0, 64).reshape({4, 16});
  m.copy_(m.narrow(0, 0, 1).expand({4, 16}));
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(m[r].to_vector<float>(), m[0].to_vector<float>());
}

// Float -> integer truncates toward zero and saturates at the integer's bounds, NaN -> 0
// (core/float_to_int.h): a plain C++ conversion is undefined out of range, and gave different
// integers at different CPU levels. Long enough for the vectorised loops, and strided too.
TEST(Tensor, FloatToIntegerCastsSaturateAndNanIsZero) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> in = {-3.7, -0.9, 0.9, 254.9,        255.0,         300.0, -1e30,  1e30,
                                  inf,  -inf, nan, 2147483647.5, -2147483648.5, 3e9,   9.3e18, -9.3e18};
  std::vector<double> many;
  for (int r = 0; r < 9; ++r) many.insert(many.end(), in.begin(), in.end());
  const int64_t n = static_cast<int64_t>(many.size());
  for (DType from : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    Tensor src = from_vector(many, {n}).to(from);
    const std::vector<double> v = src.to(DType::Float64).to_vector<double>();  // as the dtype holds them
    auto expect = [&](DType to, double lo, double hi, const char* name) {
      for (Tensor s : {src, src.unsqueeze(1).expand({n, 2}).t().select(0, 1)}) {
        const std::vector<double> got = s.to(to).to(DType::Float64).to_vector<double>();
        for (int64_t i = 0; i < n; ++i) {
          const double x = v[static_cast<size_t>(i)];
          const double want = std::isnan(x) ? 0.0 : x <= lo ? lo : x >= hi ? hi : std::trunc(x);
          ASSERT_EQ(got[static_cast<size_t>(i)], want) << dtype_name(from) << " " << x << " -> " << name;
        }
      }
    };
    expect(DType::UInt8, 0, 255, "uint8");
    expect(DType::Int32, -2147483648.0, 2147483647.0, "int32");
    expect(DType::Int64, -9223372036854775808.0, 9223372036854775807.0, "int64");
  }
}

TEST(Tensor, HalfAndBFloat16Conversions) {
  Tensor x = tensor({0.0, 1.0, -2.5, 65504.0, 1e-7, 3.14159, 1e6});
  Tensor h = x.to(DType::Float16);
  EXPECT_EQ(h.itemsize(), 2u);
  std::vector<float> back = h.to(DType::Float32).to_vector<float>();
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[2], -2.5f);
  EXPECT_EQ(back[3], 65504.0f);
  EXPECT_NEAR(back[4], 1.19209e-07f, 1e-9);  // subnormal half
  EXPECT_NEAR(back[5], 3.140625f, 1e-6);
  EXPECT_TRUE(std::isinf(back[6]));
  std::vector<float> bb = x.to(DType::BFloat16).to(DType::Float32).to_vector<float>();
  EXPECT_EQ(bb[1], 1.0f);
  EXPECT_NEAR(bb[5], 3.140625f, 1e-6);
  EXPECT_NEAR(bb[6], 999424.0f, 1.0f);
  // Round to nearest even: 1 + 2^-11 is halfway between two halfs and rounds down to 1.
  EXPECT_EQ(float(Half(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(float(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
}

// A copy within one dtype moves bits: a float16/bfloat16 NaN keeps its payload and sign through a
// strided copy (a round trip through float would make it the canonical quiet NaN).
TEST(Tensor, SameDtypeStridedCopyKeepsTheBits) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor a = zeros({3, 4}, {.dtype = dt});
    auto* bits = static_cast<uint16_t*>(a.raw_data());
    const uint16_t nan = dt == DType::Float16 ? 0xfd01 : 0xff81;  // negative, signalling, payload 1
    for (int i = 0; i < 12; ++i) bits[i] = static_cast<uint16_t>(i % 2 ? nan : 0x8000);  // and -0
    Tensor t = a.t().contiguous();
    ASSERT_FALSE(a.t().is_contiguous());
    const auto* out = static_cast<const uint16_t*>(t.raw_data());
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(out[r * 3 + c], bits[c * 4 + r]) << dtype_name(dt) << " " << r << "," << c;
  }
}

TEST(Tensor, FromBlobWrapsWithoutCopy) {
  std::vector<float> buf = {1, 2, 3, 4};
  bool freed = false;
  {
    Tensor t = from_blob(buf.data(), {2, 2}, DType::Float32, [&](void*) { freed = true; });
    t.fill_(9);
    EXPECT_EQ(buf[3], 9.0f);
  }
  EXPECT_TRUE(freed);
}

TEST(Tensor, ItemAndToVector) {
  EXPECT_EQ(tensor({42}).item(), 42.0);
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).t().to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 2, 4}));
  EXPECT_EQ(tensor({2.75}).item<int>(), 2);
}

TEST(Tensor, BoolVectorsRoundTrip) {
  // std::vector<bool> is bit-packed, so it needs its own path in and out.
  const std::vector<bool> mask{true, false, false, true, true};
  Tensor t = from_vector(mask, {5});
  EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(t.to_vector<bool>(), mask);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1, 1}));
  Tensor f = from_vector(mask, {5}, TensorOptions{.dtype = DType::Float32});
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1, 0, 0, 1, 1}));
  // Any non-zero value reads back as true, through a strided view.
  Tensor v = tensor({0.0, 2.5, -1.0, 0.0}).slice(0, 1, 4);
  EXPECT_EQ(v.to_vector<bool>(), (std::vector<bool>{true, true, false}));
  expect_error([] { from_vector(std::vector<bool>{true, false}, {3}); }, "from_vector");
}

TEST(Tensor, AsStridedChecksBounds) {
  Tensor a = zeros({4});
  EXPECT_EQ(a.as_strided({2, 2}, {1, 1}, 1).shape(), (Shape{2, 2}));
  EXPECT_THROW(a.as_strided({2, 2}, {2, 1}, 2), Error);
}
