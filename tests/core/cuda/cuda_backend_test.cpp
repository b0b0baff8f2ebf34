// The beginnings of the CUDA backend, tested on any machine: the libraries load, the device query
// answers 0 instead of failing without a GPU, checked calls name the call site, and the kernels
// register. Tests that need a GPU skip themselves when there is none.
#include <cuda_runtime_api.h>
#include <ember/config.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/copy.h"
#include "core/cuda/backend_info.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/device_count.h"
#include "core/ops.h"
#include "core/stream.h"
#if EMBER_WITH_CUDNN
#include <cudnn.h>
#endif

using namespace ember;

static_assert(EMBER_WITH_CUDA, "this file is compiled only into CUDA builds");

TEST(CudaBackend, DeviceCountIsConsistentWithBest) {
  const int physical = cuda::physical_device_count();
  EXPECT_GE(physical, 0);
  // The CUDA allocator is registered, so every GPU the runtime reports is usable.
  EXPECT_EQ(cuda::usable_device_count(), physical);
  EXPECT_EQ(cuda_device_count(), cuda::usable_device_count());
  EXPECT_LE(cuda_device_count(), physical);
  EXPECT_EQ(Device::best(), cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu());
}

// Without a driver every runtime call fails with the same (sticky) error; the count is then 0.
TEST(CudaBackend, DeviceCountIsZeroWhenTheRuntimeFails) {
  int n = -1;
  const cudaError_t err = cudaGetDeviceCount(&n);
  EXPECT_EQ(cuda::physical_device_count(), err == cudaSuccess ? n : 0) << cudaGetErrorName(err);
}

TEST(CudaBackend, CheckNamesCallFileLineAndCudaMessage) {
  const int line = __LINE__ + 2;
  try {
    EMBER_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "EMBER_CUDA_CHECK did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cudaErrorInvalidValue"), std::string::npos) << msg;
    EXPECT_NE(msg.find(cudaGetErrorString(cudaErrorInvalidValue)), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda_backend_test.cpp:" + std::to_string(line) + ":"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(EMBER_CUDA_CHECK(cudaSuccess));
}

TEST(CudaBackend, LibrariesLoadAndReportTheirVersions) {
  const cuda::BackendInfo info = cuda::backend_info();
  EXPECT_EQ(info.runtime_version, CUDART_VERSION);
#if EMBER_WITH_CUDNN
  EXPECT_EQ(info.cudnn_version, static_cast<int>(CUDNN_VERSION));
#endif
  EXPECT_EQ(info.devices, cuda::physical_device_count());
  const std::string s = cuda::describe_backend();
  EXPECT_EQ(s.rfind("CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + ".", 0), 0u) << s;
}

TEST(CudaBackend, FillKernelIsRegistered) {
  EXPECT_TRUE(fill_stub.has(DeviceType::CUDA));
}

// Needs a GPU: wraps cudaMalloc'ed memory in a tensor (no CUDA allocator exists yet) and fills
// it whole, through a strided view and in other element widths.
TEST(CudaBackend, FillWritesEveryElementOfStridedViews) {
  if (cuda::physical_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  void* p = nullptr;
  EMBER_CUDA_CHECK(cudaMalloc(&p, 4 * 6 * sizeof(float)));
  Tensor t = from_blob(
      p, {4, 6}, DType::Float32, [](void* q) { (void)cudaFree(q); }, Device::cuda(0));
  t.fill_(2.5);
  Tensor cols = t.slice(1, 1, 6, 2);  // columns 1, 3, 5: strided
  cols.fill_(-1.0);
  t.t().select(0, 0).fill_(7.0);  // column 0 through a transposed view
  std::vector<float> host(24);
  // The fills ran on the compute stream, which is non-blocking: a plain cudaMemcpy (legacy
  // default stream) would not wait for them.
  get_stream(Device::cuda(0), StreamKind::Compute).synchronize();
  EMBER_CUDA_CHECK(cudaMemcpy(host.data(), p, sizeof(float) * host.size(), cudaMemcpyDeviceToHost));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(host[r * 6 + c], c == 0 ? 7.0f : (c % 2 ? -1.0f : 2.5f)) << r << "," << c;

  for (DType dt : {DType::Float16, DType::Int64, DType::UInt8}) {
    const size_t n = 10, bytes = n * itemsize(dt);
    void* q = nullptr;
    EMBER_CUDA_CHECK(cudaMalloc(&q, bytes));
    Tensor u = from_blob(
        q, {static_cast<int64_t>(n)}, dt, [](void* x) { (void)cudaFree(x); }, Device::cuda(0));
    u.fill_(3.0);
    std::vector<unsigned char> got(bytes);
    get_stream(Device::cuda(0), StreamKind::Compute).synchronize();
    EMBER_CUDA_CHECK(cudaMemcpy(got.data(), q, bytes, cudaMemcpyDeviceToHost));
    Tensor ref = full({static_cast<int64_t>(n)}, 3.0, {.dtype = dt});
    EXPECT_EQ(std::memcmp(got.data(), ref.raw_data(), bytes), 0) << dt;
  }
}
