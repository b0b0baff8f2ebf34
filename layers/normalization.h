// Normalisation layers over core's fused batch_norm / layer_norm. BatchNorm1d ([N, C] or
// [N, C, L]) and BatchNorm2d ([N, C, H, W]) keep running statistics (running_mean, running_var,
// num_batches_tracked buffers) updated in training with `momentum` (or a cumulative average when
// momentum is unset, as PyTorch's momentum=None) and used in eval; without
// track_running_stats they always normalise with batch statistics. LayerNorm normalises over
// the trailing normalized_shape dims. Affine weights start at ones, biases at zeros.
#pragma once

#include <optional>

#include "layers/module.h"

namespace ember::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: cumulative moving average
  bool affine = true;
  bool track_running_stats = true;
};

class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;

 protected:
  BatchNormBase(int64_t num_features, BatchNormOptions options, const char* name);
  virtual void check_input(const Tensor& input) const = 0;
  const char* name_;
};

class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {})
      : BatchNormBase(num_features, options, "BatchNorm1d") {}
  std::string type_name() const override { return "BatchNorm1d"; }

 protected:
  void check_input(const Tensor& input) const override;
};

class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {})
      : BatchNormBase(num_features, options, "BatchNorm2d") {}
  std::string type_name() const override { return "BatchNorm2d"; }

 protected:
  void check_input(const Tensor& input) const override;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

  Shape normalized_shape;
  LayerNormOptions options;
  Tensor weight, bias;
};

}  // namespace ember::nn
