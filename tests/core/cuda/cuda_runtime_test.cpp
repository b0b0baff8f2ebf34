// The CUDA runtime pieces that can be checked on any machine: the vendor libraries' error macros
// name file:line, status and message; cuBLAS loads lazily; the choosers and vendor paths are
// registered; and without a GPU every device-touching entry point fails with an ember::Error that
// names the device instead of crashing. Cases that need a GPU skip without one.
#include <cuda_runtime_api.h>
#include <ember/config.h>
#include <gtest/gtest.h>

#include <string>

#include "core/copy.h"
#include "core/cuda/cublas_api.h"
#include "core/cuda/cuda_allocator.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_count.h"
#include "core/cuda/launch_count.h"
#include "core/gemm_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"
#include "core/ops.h"
#include "core/rnn_kernels.h"
#include "test_helpers.h"
#if EMBER_WITH_CUDNN
#include "core/cuda/cudnn_check.h"
#endif
#if EMBER_WITH_NCCL
#include "core/cuda/nccl_check.h"
#endif

using namespace ember;
using test_util::error_of;
using test_util::has;

namespace {
bool no_gpu() {
  return cuda::physical_device_count() == 0;
}
}  // namespace

TEST(CudaRuntime, CublasCheckNamesFileLineStatusAndMessage) {
  const int line = __LINE__ + 1;
  const std::string msg = error_of([] { EMBER_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
  EXPECT_TRUE(has(msg, "cuBLAS error at ")) << msg;
  EXPECT_TRUE(has(msg, "cuda_runtime_test.cpp:" + std::to_string(line) + ":")) << msg;
  EXPECT_TRUE(has(msg, "CUBLAS_STATUS_INVALID_VALUE")) << msg;
  // cuBLAS's own text for the status (the library loads lazily to give it).
  ASSERT_TRUE(cuda::cublas_available());
  EXPECT_TRUE(has(msg, cuda::cublas_api().status_string(CUBLAS_STATUS_INVALID_VALUE))) << msg;
  EXPECT_NO_THROW(EMBER_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST(CudaRuntime, CublasLoadsLazilyWithEveryEntryPoint) {
  std::string why;
  ASSERT_TRUE(cuda::cublas_available(&why)) << why;
  const cuda::CublasApi& api = cuda::cublas_api();
  EXPECT_NE(api.sgemm, nullptr);
  EXPECT_NE(api.dgemm_strided_batched, nullptr);
  EXPECT_NE(api.gemm_ex, nullptr);  // the bfloat16 vendor side
  EXPECT_NE(api.gemm_strided_batched_ex, nullptr);
  EXPECT_NE(api.set_stream, nullptr);
}

#if EMBER_WITH_CUDNN
TEST(CudaRuntime, CudnnCheckNamesFileLineStatusAndMessage) {
  const int line = __LINE__ + 1;
  const std::string msg = error_of([] { EMBER_CUDNN_CHECK(CUDNN_STATUS_BAD_PARAM); });
  EXPECT_TRUE(has(msg, "cuDNN error at ")) << msg;
  EXPECT_TRUE(has(msg, "cuda_runtime_test.cpp:" + std::to_string(line) + ":")) << msg;
  EXPECT_TRUE(has(msg, "CUDNN_STATUS_BAD_PARAM")) << msg;
  EXPECT_TRUE(has(msg, cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM))) << msg;
  // cuDNN 9's sub-codes keep their category's name.
  EXPECT_TRUE(has(error_of([] { EMBER_CUDNN_CHECK(CUDNN_STATUS_NOT_SUPPORTED_SHAPE); }), "CUDNN_STATUS_NOT_SUPPORTED"));
}
#endif

#if EMBER_WITH_NCCL
TEST(CudaRuntime, NcclCheckNamesFileLineResultAndMessage) {
  const int line = __LINE__ + 1;
  const std::string msg = error_of([] { EMBER_NCCL_CHECK(ncclInvalidArgument); });
  EXPECT_TRUE(has(msg, "NCCL error at ")) << msg;
  EXPECT_TRUE(has(msg, "cuda_runtime_test.cpp:" + std::to_string(line) + ":")) << msg;
  EXPECT_TRUE(has(msg, "ncclInvalidArgument")) << msg;
  EXPECT_TRUE(has(msg, ncclGetErrorString(ncclInvalidArgument))) << msg;
}
#endif

TEST(CudaRuntime, ChoosersAndVendorPathsAreRegistered) {
  EXPECT_TRUE(copy_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(gemm_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(gemm_batched_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(has_vendor(KernelFamily::Gemm));
#if EMBER_WITH_CUDNN
  EXPECT_TRUE(conv2d_forward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(conv2d_backward_input_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(conv2d_backward_weight_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(has_vendor(KernelFamily::Conv));
  EXPECT_TRUE(batch_norm_forward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(batch_norm_backward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(has_vendor(KernelFamily::BatchNorm));
  EXPECT_TRUE(avg_pool2d_forward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(avg_pool2d_backward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(has_vendor(KernelFamily::Pool));
  EXPECT_TRUE(rnn_forward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(rnn_backward_stub.has(DeviceType::CUDA));
  EXPECT_TRUE(has_vendor(KernelFamily::Rnn));
#endif
}

TEST(CudaRuntime, WithoutAGpuDeviceEntryPointsNameTheDevice) {
  if (!no_gpu()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_TRUE(has(error_of([] { get_allocator(Device::cuda(0)); }), "cuda:0: no such device (0 CUDA devices"));
  EXPECT_TRUE(has(error_of([] { get_stream(Device::cuda(0), StreamKind::Copy); }), "cuda:0: no such device"));
  EXPECT_TRUE(has(error_of([] { make_event(Device::cuda(1)); }), "cuda:1: no such device"));
  EXPECT_TRUE(has(error_of([] { (void)ones({2, 3}).to(Device::cuda(0)); }), "cuda:0: no such device"));
  EXPECT_TRUE(has(error_of([] { (void)zeros({4}, {.device = Device::cuda(2)}); }), "cuda:2: no such device"));
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_EQ(Device::best(), Device::cpu());
}

TEST(CudaRuntime, PinnedAllocatorWorksWithOrWithoutAGpu) {
  Allocator* a = pinned_allocator();
  ASSERT_NE(a, nullptr);
  const int64_t before = a->stats().allocations;
  DataPtr p = a->allocate(4096);
  ASSERT_NE(p.get(), nullptr);
  static_cast<char*>(p.get())[4095] = 1;  // writable host memory
  EXPECT_EQ(a->stats().allocations, before + 1);
  if (!no_gpu()) {
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, p.get()), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "pinned memory is page-locked with a GPU";
  }
}

TEST(CudaRuntime, LaunchCounterStartsAtZeroWithoutLaunches) {
  // Nothing in this process has launched a kernel without a GPU; with one it only grows.
  const uint64_t n = cuda::kernel_launch_count();
  if (no_gpu()) {
    EXPECT_EQ(n, 0u);
  }
  cuda::detail::count_launch();
  EXPECT_EQ(cuda::kernel_launch_count(), n + 1);
}

// Needs a GPU: streams, events, the allocator's reuse and copies in both directions.
TEST(CudaRuntime, StreamsEventsAllocatorAndCopiesOnAGpu) {
  if (no_gpu()) GTEST_SKIP() << "no CUDA device";
  Stream& copy = get_stream(Device::cuda(0), StreamKind::Copy);
  EXPECT_EQ(copy.kind(), StreamKind::Copy);
  EXPECT_NE(copy.native_handle(), get_stream(Device::cuda(0)).native_handle());
  auto ev = make_event(Device::cuda(0));
  ev->record(copy);
  ev->synchronize();
  EXPECT_TRUE(ev->query());

  Tensor h = arange(0, 24, 1, {.dtype = DType::Float32}).reshape({4, 6});
  Tensor d = h.to(Device::cuda(0));
  EXPECT_EQ(d.device(), Device::cuda(0));
  EXPECT_EQ(d.t().contiguous().cpu().to_vector<float>(), h.t().contiguous().to_vector<float>());
  EXPECT_EQ(d.to(DType::Float64).cpu().to_vector<double>(), h.to(DType::Float64).to_vector<double>());

  CachingAllocator& alloc = cuda::device_allocator(0);
  void* first;
  {
    Tensor t = empty({1000}, {.device = Device::cuda(0)});
    first = t.storage()->ptr();
  }
  Tensor again = empty({1000}, {.device = Device::cuda(0)});
  EXPECT_EQ(again.storage()->ptr(), first);
  EXPECT_GT(alloc.stats().in_use, 0);
}
