#include "data/dataset.h"

#include <algorithm>
#include <cstring>

#include "core/autograd/grad_mode.h"
#include "core/error.h"

namespace ember::data {

Tensor collate(const std::vector<Tensor>& items) {
  EMBER_CHECK(!items.empty(), "collate: no examples to stack");
  const Shape& s = items[0].shape();
  Shape out_shape{static_cast<int64_t>(items.size())};
  out_shape.insert(out_shape.end(), s.begin(), s.end());
  Tensor out = empty(out_shape, {items[0].dtype(), Device::cpu()});
  const size_t bytes = static_cast<size_t>(items[0].numel()) * items[0].itemsize();
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < items.size(); ++i) {
    EMBER_CHECK(items[i].shape() == s && items[i].dtype() == items[0].dtype(), "collate: example ", i, " has shape ",
                shape_str(items[i].shape()), " and dtype ", dtype_name(items[i].dtype()), " but example 0 has ",
                shape_str(s), " and ", dtype_name(items[0].dtype()));
    Tensor c = items[i].device().is_cpu() ? items[i].contiguous() : items[i].cpu().contiguous();
    if (bytes) std::memcpy(dst + i * bytes, c.raw_data(), bytes);
  }
  return out;
}

Example Dataset::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const {
  std::vector<Tensor> xs, ys;
  xs.reserve(indices.size());
  ys.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    Example e = get(indices[i], *gens[i]);
    xs.push_back(e.input);
    ys.push_back(e.target);
  }
  return {collate(xs), collate(ys)};
}

Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& rows) {
  Shape shape = src.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = empty(shape, {src.dtype(), Device::cpu()});
  const size_t row_bytes = static_cast<size_t>(src.numel() / std::max<int64_t>(src.size(0), 1)) * src.itemsize();
  const char* s = static_cast<const char*>(src.raw_data());
  char* d = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    EMBER_CHECK(rows[i] >= 0 && rows[i] < src.size(0), "dataset: index ", rows[i], " is out of range [0, ", src.size(0),
                ")");
    std::memcpy(d + i * row_bytes, s + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  }
  return out;
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets, Transform transform)
    : inputs_(inputs.detach().cpu().contiguous()),
      targets_(targets.detach().cpu().contiguous()),
      transform_(std::move(transform)) {
  EMBER_CHECK(inputs_.dim() >= 1 && targets_.dim() >= 1, "TensorDataset: inputs and targets need a leading dim");
  EMBER_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: ", inputs_.size(0), " inputs but ", targets_.size(0),
              " targets");
}

FirstN::FirstN(std::unique_ptr<Dataset> all, int64_t n) : all_(std::move(all)) {
  EMBER_CHECK(all_, "FirstN: no data set");
  EMBER_CHECK(n >= 0, "FirstN: n must not be negative, got ", n);
  n_ = std::min(n, all_->size());
}

Example FirstN::get(int64_t index, Generator& gen) const {
  EMBER_CHECK(index >= 0 && index < n_, "FirstN: index ", index, " is outside its ", n_, " examples");
  return all_->get(index, gen);
}

Example FirstN::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const {
  for (int64_t i : indices) EMBER_CHECK(i >= 0 && i < n_, "FirstN: index ", i, " is outside its ", n_, " examples");
  return all_->get_batch(indices, gens);  // the data set's own fast path
}

Example TensorDataset::get(int64_t index, Generator& gen) const {
  EMBER_CHECK(index >= 0 && index < size(), "TensorDataset: index ", index, " is out of range [0, ", size(), ")");
  Tensor x = inputs_.select(0, index);
  if (transform_) x = transform_(x, gen);
  return {x, targets_.select(0, index)};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const {
  if (transform_) return Dataset::get_batch(indices, gens);
  return {gather_rows(inputs_, indices), gather_rows(targets_, indices)};
}

}  // namespace ember::data
