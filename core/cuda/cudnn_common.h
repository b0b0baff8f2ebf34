// What the cuDNN implementations share: a handle per device and thread bound to the current
// stream, RAII descriptors, and workspaces taken from the device's caching allocator (so cuDNN's
// scratch memory is cached, counted and released on out-of-memory like every other block).
// cuDNN 9 marks the descriptor ("legacy") API deprecated in favour of its graph API but still
// ships it; Ember uses it because it maps one-to-one onto Ember's fused ops, hence the
// -Wdeprecated-declarations suppression in the files that include this header.
#pragma once

#include <ember/config.h>
#if EMBER_WITH_CUDNN

#include <cudnn.h>

#include "core/allocator.h"
#include "core/cuda/cudnn_check.h"
#include "core/dtype.h"

namespace ember::cuda {

// The handle of `device` for this thread, bound to the device's current stream.
cudnnHandle_t cudnn_handle(int device);
cudnnDataType_t cudnn_dtype(DType t);  // float32/float64/float16/bfloat16; ember::Error otherwise
bool cudnn_supports(DType t);

// Scratch memory from the caching allocator of `device`, tied to its current stream.
DataPtr cudnn_workspace(int device, size_t bytes);

#define EMBER_CUDNN_DESCRIPTOR(Name, type, create, destroy) \
  struct Name {                                             \
    type d = nullptr;                                       \
    Name() { EMBER_CUDNN_CHECK(create(&d)); }               \
    ~Name() { (void)destroy(d); }                           \
    Name(const Name&) = delete;                             \
    Name& operator=(const Name&) = delete;                  \
    operator type() const { return d; }                     \
  }

EMBER_CUDNN_DESCRIPTOR(TensorDesc, cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor);
EMBER_CUDNN_DESCRIPTOR(FilterDesc, cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor);
EMBER_CUDNN_DESCRIPTOR(ConvDesc, cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                       cudnnDestroyConvolutionDescriptor);
EMBER_CUDNN_DESCRIPTOR(PoolDesc, cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor);

// An NCHW (contiguous) 4-d tensor descriptor.
void set_nchw(cudnnTensorDescriptor_t d, DType t, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
