// Rows: the strided copy between two tensors of one dtype (behind .contiguous(), strided copy_ and
// every cross-layout copy on a device: core/cuda/copy_kernel.h) and fill_ (core/copy.h), in every
// element width, on random bit patterns (NaN payloads, -0, subnormals): transposed, permuted,
// sliced, selected and broadcast (zero-stride) sources, transposed and every-other-column
// destinations (the elements outside the view keep theirs), sizes that are no multiple of a block;
// fill values converted as the CPU converts them, into contiguous tensors and strided views.
// Compared by raw bits. These rows took over tests/emu's copy and fill checks.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "op_table.h"
#include "oracle.h"

namespace ember::ops_test {
namespace {

const std::vector<DType> kAll = {DType::UInt8, DType::Bool,    DType::Float16, DType::BFloat16,
                                 DType::Int32, DType::Float32, DType::Int64,   DType::Float64};

// Random bit patterns of the dtype's width (a bool holds 0 or 1); in the floating dtypes every
// 17th element also a NaN (or an infinity) of either sign with the random payload and every 29th
// a -0, so that each row holds them whatever the draw.
Tensor random_bits(Generator& g, Shape shape, DType dt) {
  if (dt == DType::Bool) return randint(0, 2, std::move(shape), {.dtype = DType::Bool}, &g);
  const size_t size = itemsize(dt);
  const Tensor bytes = randint(0, 256, {numel_of(shape) * static_cast<int64_t>(size)}, {.dtype = DType::UInt8}, &g);
  Tensor out = empty(std::move(shape), {.dtype = dt});
  auto* p = static_cast<unsigned char*>(out.raw_data());
  std::memcpy(p, bytes.raw_data(), static_cast<size_t>(bytes.numel()));
  if (!is_floating(dt)) return out;
  // The exponent's bits, as a little-endian word of the element's width.
  const uint64_t exponent = dt == DType::Float64   ? 0x7ff0000000000000ull
                            : dt == DType::Float32 ? 0x7f800000ull
                            : dt == DType::Float16 ? 0x7c00ull
                                                   : 0x7f80ull;
  const uint64_t sign = uint64_t{1} << (8 * size - 1);
  for (int64_t i = 0; i < out.numel(); ++i) {
    uint64_t w = 0;
    std::memcpy(&w, p + i * size, size);
    if (i % 17 == 0) w |= exponent;
    if (i % 29 == 0) w = sign;
    std::memcpy(p + i * size, &w, size);
  }
  return out;
}

// Exact, by raw bits, against `oracle`, which reads the elements through their strides
// (oracle.h) and never copies or fills with the kernels under test.
OpRow bits_row(std::string name, std::function<Inputs(Generator&)> inputs, std::function<Tensor(const Inputs&)> f,
               std::function<Tensor(const Inputs&)> oracle) {
  OpRow r{std::move(name), std::move(inputs), std::move(f), 0.0, false, false, false};
  r.oracle = std::move(oracle);
  return r;
}

Tensor cat_words(const std::vector<Tensor>& parts) {
  return cat(parts, 0);
}

}  // namespace

void add_copy_rows(std::vector<OpRow>& t) {
  for (DType dt : kAll) {
    const std::string name = dtype_name(dt);
    t.push_back(bits_row(
        "copy_strided_sources_" + name,
        [dt](Generator& g) {
          return Inputs{random_bits(g, {7, 13, 5}, dt)};
        },
        [](const Inputs& x) {
          const Tensor& b = x[0];
          std::vector<Tensor> r;
          for (const Tensor& v : {b.transpose(0, 2), b.permute({1, 2, 0}), b.narrow(1, 3, 9), b.select(2, 4),
                                  b.narrow(1, 2, 1).expand({7, 13, 5})})
            r.push_back(raw_bits(v.contiguous()));
          return cat(r, 0);
        },
        [dt](const Inputs& x) {
          const Tensor& b = x[0];
          std::vector<Tensor> r;
          for (const Tensor& v : {b.transpose(0, 2), b.permute({1, 2, 0}), b.narrow(1, 3, 9), b.select(2, 4),
                                  b.narrow(1, 2, 1).expand({7, 13, 5})})
            r.push_back(words_of(element_bits(v), dt));
          return cat_words(r);
        }));
    // 549 and 279 elements: more than a block (256 threads), not a multiple of one.
    t.push_back(bits_row(
        "copy_strided_destinations_" + name,
        [dt](Generator& g) {
          return Inputs{random_bits(g, {9, 61}, dt), random_bits(g, {61, 9}, dt), random_bits(g, {1, 31}, dt)};
        },
        [](const Inputs& x) {
          NoGradGuard ng;
          const Tensor into_transposed = x[0].clone(), every_other_column = x[0].clone();
          into_transposed.t().copy_(x[1]);
          every_other_column.slice(1, 0, 61, 2).copy_(x[2].expand({9, 31}));
          return cat({raw_bits(into_transposed), raw_bits(every_other_column)}, 0);
        },
        [dt](const Inputs& x) {
          // into_transposed[i][j] = x1[j][i]; every_other_column: x0 with its even columns x2's.
          const std::vector<uint64_t> x0 = element_bits(x[0]), x2 = element_bits(x[2]);
          std::vector<uint64_t> every_other_column = x0;
          for (size_t i = 0; i < 9; ++i)
            for (size_t j = 0; j < 61; j += 2) every_other_column[i * 61 + j] = x2[j / 2];
          return cat_words({words_of(element_bits(x[1].t()), dt), words_of(every_other_column, dt)});
        }));
    t.push_back(bits_row(
        "fill_contiguous_and_strided_" + name,
        [dt](Generator& g) {
          return Inputs{random_bits(g, {6, 151}, dt)};
        },
        [](const Inputs& x) {
          NoGradGuard ng;
          std::vector<Tensor> r;
          for (double v : {0.0, -0.0, 1.5, -3.0, 70000.0, 1e-8}) {
            Tensor whole = x[0].clone(), strided = x[0].clone();
            whole.fill_(v);
            strided.t().slice(0, 1, 151, 3).fill_(v);  // 300 of the 906 elements
            r.push_back(raw_bits(whole));
            r.push_back(raw_bits(strided));
          }
          return cat(r, 0);
        },
        [dt](const Inputs& x) {
          // The strided view is x.t()'s rows 1, 4, ..., 148: x's columns j % 3 == 1, every row.
          const std::vector<uint64_t> x0 = element_bits(x[0]);
          std::vector<Tensor> r;
          for (double v : {0.0, -0.0, 1.5, -3.0, 70000.0, 1e-8}) {
            const uint64_t b = bits_of(v, dt);
            std::vector<uint64_t> strided = x0;
            for (size_t i = 0; i < 6; ++i)
              for (size_t j = 1; j < 151; j += 3) strided[i * 151 + j] = b;
            r.push_back(words_of(std::vector<uint64_t>(x0.size(), b), dt));
            r.push_back(words_of(strided, dt));
          }
          return cat_words(r);
        }));
  }
}

}  // namespace ember::ops_test
