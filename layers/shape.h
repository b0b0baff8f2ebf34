// Flatten and Unflatten: reshaping layers (views when the input allows) for Sequential models,
// e.g. between the convolutional and the fully connected part of a CNN.
#pragma once

#include "layers/module.h"

namespace ember::nn {

// Flattens dims start_dim..end_dim into one (PyTorch's defaults keep the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override { return input.flatten(start_dim, end_dim); }
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
  }
  int64_t start_dim, end_dim;
};

// Splits dim into `sizes` (one entry may be -1).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {}
  Tensor forward(const Tensor& input) override { return input.unflatten(dim, sizes); }
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim) + ", sizes=" + shape_str(sizes); }
  int64_t dim;
  Shape sizes;
};

}  // namespace ember::nn
