// Datasets: random access to (input, target) examples. The DataLoader hands each call its own
// Generator, derived from (seed, epoch, index), so random transforms give the same result for a
// seed whatever the number of worker threads and after a resume.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember::data {

struct Example {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index, Generator& gen) const = 0;
  // A batch of examples stacked along a new dim 0. The default calls get() per index and copies
  // each example into the batch; datasets with a faster path override it.
  virtual Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const;
};

// Stacks same-shaped CPU tensors along a new leading dim (without autograd).
Tensor collate(const std::vector<Tensor>& items);

// A per-sample transform: input tensor in, input tensor out, randomness from `gen`.
using Transform = std::function<Tensor(const Tensor& input, Generator& gen)>;

// Inputs and targets held in memory: example i is (inputs[i], targets[i]).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets, Transform transform = nullptr);
  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index, Generator& gen) const override;
  Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const override;

 private:
  Tensor inputs_, targets_;
  Transform transform_;
};

// The first `n` examples of a data set (a --limit for sources that have none of their own).
class FirstN : public Dataset {
 public:
  FirstN(std::unique_ptr<Dataset> all, int64_t n);
  int64_t size() const override { return n_; }
  Example get(int64_t index, Generator& gen) const override;
  Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const override;

 private:
  std::unique_ptr<Dataset> all_;
  int64_t n_;
};

// Rows gathered from a tensor's dim 0 into a new contiguous tensor (the loader's fast path).
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& rows);

}  // namespace ember::data
