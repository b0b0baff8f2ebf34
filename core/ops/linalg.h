// Matrix products through OpenBLAS (float32/float64) on the CPU.
#pragma once

#include "core/tensor.h"

namespace ember {

// 1-D·1-D dot, 2-D·2-D mm, 1-D/2-D mixes, and batched with broadcasting over leading dims
// (NumPy matmul semantics).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // [n,k]·[k,m]
Tensor bmm(const Tensor& a, const Tensor& b);  // [B,n,k]·[B,k,m]
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta = 1.0,
             double alpha = 1.0);  // beta*bias + alpha*(a·b), bias broadcast to [n,m]
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);

}  // namespace ember
