#include "models/text_generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/ops.h"
#include "core/philox.h"

namespace ember::models {

int64_t sample_logits(const Tensor& logits, double temperature, int64_t top_k, Generator& gen) {
  EMBER_CHECK(logits.dim() == 1 && logits.numel() > 0 && logits.is_floating_point(),
              "sample_logits: expected floating logits [V] with V >= 1, got ", shape_str(logits.shape()), " ",
              dtype_name(logits.dtype()));
  EMBER_CHECK(top_k >= 0, "sample_logits: top_k must be 0 (no limit) or positive, got ", top_k);
  const std::vector<double> z = logits.detach().cpu().to_vector<double>();
  const auto V = static_cast<int64_t>(z.size());
  for (int64_t i = 0; i < V; ++i)
    EMBER_CHECK(!std::isnan(z[static_cast<size_t>(i)]), "sample_logits: logit ", i, " is NaN");
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  // Most likely first; the stable sort keeps lower ids first among equal logits.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return z[static_cast<size_t>(a)] > z[static_cast<size_t>(b)]; });
  if (temperature <= 0) return order[0];
  const int64_t k = top_k > 0 ? std::min(top_k, V) : V;
  const double zmax = z[static_cast<size_t>(order[0])];
  std::vector<double> p(static_cast<size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    p[static_cast<size_t>(i)] = std::exp((z[static_cast<size_t>(order[static_cast<size_t>(i)])] - zmax) / temperature);
    total += p[static_cast<size_t>(i)];
  }
  // One float64 uniform with the layout of rand({1}, float64, &gen) (core/generator.h).
  const Philox4x32 r = philox_block(gen.seed(), gen.reserve(1));
  const double u = uints_to_unit_double(r.v[0], r.v[1]) * total;
  double acc = 0;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[static_cast<size_t>(i)];
    if (u < acc) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(k - 1)];  // u within rounding of the total
}

TextGenerator::TextGenerator(LstmLanguageModel& model, SamplingOptions opts)
    : model_(model), opts_(opts), gen_(opts.seed) {
  EMBER_CHECK(opts.top_k >= 0, "TextGenerator: top_k must be 0 (no limit) or positive, got ", opts.top_k);
}

std::vector<int64_t> TextGenerator::generate(const std::vector<int64_t>& prompt, int64_t length, int64_t stop_token) {
  EMBER_CHECK(!prompt.empty(), "TextGenerator::generate: the prompt is empty");
  EMBER_CHECK(length >= 0, "TextGenerator::generate: length must be non-negative, got ", length);
  const int64_t V = model_.opts.vocab_size;
  for (int64_t t : prompt)
    EMBER_CHECK(t >= 0 && t < V, "TextGenerator::generate: prompt token ", t, " is out of range [0, ", V, ")");
  NoGradGuard ng;
  const bool was_training = model_.is_training();
  model_.eval();
  const Device dev = model_.head.weight.device();
  std::vector<int64_t> out;
  try {
    nn::RnnOutput r = model_.forward_with_state(
        from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}, TensorOptions{DType::Int64, dev}));
    for (int64_t i = 0; i < length; ++i) {
      Tensor logits = r.output.select(1, r.output.size(1) - 1).reshape({V});
      const int64_t next = sample_logits(logits, opts_.temperature, opts_.top_k, gen_);
      out.push_back(next);
      if (next == stop_token || i + 1 == length) break;
      r = model_.forward_with_state(from_vector(std::vector<int64_t>{next}, {1, 1}, TensorOptions{DType::Int64, dev}),
                                    {r.h_n, r.c_n});
    }
  } catch (...) {
    model_.train(was_training);
    throw;
  }
  model_.train(was_training);
  return out;
}

}  // namespace ember::models
