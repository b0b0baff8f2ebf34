// Tensor creation: constants, ranges, random numbers (through core/generator.h) and tensors from
// C++ values.
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember {

Tensor zeros(Shape shape, TensorOptions opts = {});
Tensor ones(Shape shape, TensorOptions opts = {});
Tensor full(Shape shape, double value, TensorOptions opts = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor scalar_tensor(double value, TensorOptions opts = {});  // 0-dim
// [start, end) with step; dtype int64 unless opts says otherwise.
Tensor arange(double end, TensorOptions opts = {.dtype = DType::Int64});
Tensor arange(double start, double end, double step = 1.0, TensorOptions opts = {.dtype = DType::Int64});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {});

// Random: U[0,1), N(0,1), integers in [low, high), Bernoulli(p). All draw from `gen` (the
// default generator when null) with the counter layout documented in core/generator.h.
Tensor rand(Shape shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(Shape shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions opts = {.dtype = DType::Int64},
               Generator* gen = nullptr);
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);  // same shape as p, values 0/1
Tensor bernoulli(Shape shape, double p, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randperm(int64_t n, Generator* gen = nullptr);  // int64
// In place: fill with U[low, high) / N(mean, std). No autograd history.
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);

// From C++ values (copied). The dtype follows T unless opts gives another.
template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, std::optional<TensorOptions> opts = std::nullopt);
// std::vector<bool> is bit-packed; it makes a Bool tensor unless opts gives another dtype.
template <>
Tensor from_vector<bool>(const std::vector<bool>& values, Shape shape, std::optional<TensorOptions> opts);
// 1-D float32 (or opts.dtype) tensor from a list: tensor({1, 2, 3}).
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {});
// 2-D from nested lists: tensor({{1, 2}, {3, 4}}).
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts = {});

}  // namespace ember
