// Reductions over any set of dims (empty dims = all dims), with keepdim; softmax family.
#pragma once

#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember {

Tensor sum(const Tensor& a, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false);
// Sums `grad` down to `shape` (the inverse of broadcasting), as every broadcasting op's backward
// needs.
Tensor sum_to(const Tensor& grad, const Shape& shape);

Tensor max(const Tensor& a);  // over all elements
Tensor min(const Tensor& a);
// Values and int64 indices along `dim` (first occurrence on ties).
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& a, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& a);  // flat index
Tensor argmin(const Tensor& a);
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);

Tensor var(const Tensor& a, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& a, std::vector<int64_t> dims = {}, bool unbiased = true, bool keepdim = false);
Tensor logsumexp(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
// p-norm over dims (p = 2 default; p = inf for max-abs).
Tensor norm(const Tensor& a, double p = 2.0, std::vector<int64_t> dims = {}, bool keepdim = false);

Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

}  // namespace ember
