#include "layers/normalization.h"

#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/ops/creation.h"
#include "layers/functional.h"
#include "layers/init.h"

namespace ember::nn {

BatchNormBase::BatchNormBase(int64_t n, BatchNormOptions o, const char* name)
    : num_features(n), options(o), name_(name) {
  EMBER_CHECK(n > 0, name, ": num_features must be positive, got ", n);
  EMBER_CHECK(o.eps > 0, name, ": eps must be positive, got ", o.eps);
  if (o.momentum)
    EMBER_CHECK(*o.momentum >= 0 && *o.momentum <= 1, name, ": momentum must be in [0, 1], got ", *o.momentum);
  if (o.affine) {
    weight = ones({n});
    bias = zeros({n});
  }
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
  if (o.track_running_stats) {
    running_mean = zeros({n});
    running_var = ones({n});
    num_batches_tracked = zeros({}, {.dtype = DType::Int64});
  }
  register_buffer("running_mean", &running_mean);
  register_buffer("running_var", &running_var);
  register_buffer("num_batches_tracked", &num_batches_tracked);
}

void BatchNormBase::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  NoGradGuard ng;
  num_batches_tracked.zero_();
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormBase::forward(const Tensor& input) {
  EMBER_CHECK(input.defined(), name_, ": undefined input");
  check_input(input);
  EMBER_CHECK(input.size(1) == num_features, name_, ": input ", shape_str(input.shape()), " has ", input.size(1),
              " channels in dim 1, the layer was built for ", num_features);
  double factor = 0.0;
  if (is_training() && options.track_running_stats) {
    {
      NoGradGuard ng;
      num_batches_tracked.add_(1.0);
    }
    factor = options.momentum ? *options.momentum : 1.0 / num_batches_tracked.item();
  }
  // Batch statistics in training, and always when there are no running statistics to use.
  const bool use_batch_stats = is_training() || !running_mean.defined();
  const bool pass_running = !is_training() || options.track_running_stats;
  return F::batch_norm(input, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(), weight,
                       bias, use_batch_stats, factor, options.eps);
}

std::string BatchNormBase::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << options.eps << ", momentum=";
  if (options.momentum)
    os << *options.momentum;
  else
    os << "None";
  os << ", affine=" << (options.affine ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats ? "true" : "false");
  return os.str();
}

void BatchNorm1d::check_input(const Tensor& input) const {
  EMBER_CHECK(input.dim() == 2 || input.dim() == 3, "BatchNorm1d: expected a 2-D [N, C] or 3-D [N, C, L] input, got ",
              shape_str(input.shape()));
}

void BatchNorm2d::check_input(const Tensor& input) const {
  EMBER_CHECK(input.dim() == 4, "BatchNorm2d: expected a 4-D [N, C, H, W] input, got ", shape_str(input.shape()));
}

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o) : normalized_shape(std::move(shape)), options(o) {
  EMBER_CHECK(!normalized_shape.empty(), "LayerNorm: normalized_shape must not be empty");
  for (int64_t s : normalized_shape)
    EMBER_CHECK(s > 0, "LayerNorm: normalized_shape ", shape_str(normalized_shape), " must be positive");
  if (o.elementwise_affine) {
    weight = ones(normalized_shape);
    if (o.bias) bias = zeros(normalized_shape);
  }
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& input) {
  return F::layer_norm(input, normalized_shape, weight, bias, options.eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << shape_str(normalized_shape) << ", eps=" << options.eps
     << ", elementwise_affine=" << (options.elementwise_affine ? "true" : "false");
  return os.str();
}

}  // namespace ember::nn
