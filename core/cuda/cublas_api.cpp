#include "core/cuda/cublas_api.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <utility>

#include "core/cuda/device_guard.h"
#include "core/error.h"

namespace ember::cuda {

namespace {

struct Loaded {
  CublasApi api;
  std::string error;  // empty when loaded
};

template <typename Fn>
void resolve(void* lib, const char* name, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!out && error.empty()) error = std::string("symbol ") + name + " not found in cuBLAS";
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    // The soname of the major version the headers describe; the unversioned name as a fallback
    // for distributions that only ship that.
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      r.error = "cannot load " + soname + ": " + (e ? e : "unknown error");
      return r;
    }
    resolve(lib, "cublasCreate_v2", r.api.create, r.error);
    resolve(lib, "cublasDestroy_v2", r.api.destroy, r.error);
    resolve(lib, "cublasSetStream_v2", r.api.set_stream, r.error);
    resolve(lib, "cublasSetMathMode", r.api.set_math_mode, r.error);
    resolve(lib, "cublasSetWorkspace_v2", r.api.set_workspace, r.error);
    resolve(lib, "cublasSgemm_v2", r.api.sgemm, r.error);
    resolve(lib, "cublasDgemm_v2", r.api.dgemm, r.error);
    resolve(lib, "cublasSgemmStridedBatched", r.api.sgemm_strided_batched, r.error);
    resolve(lib, "cublasDgemmStridedBatched", r.api.dgemm_strided_batched, r.error);
    resolve(lib, "cublasGemmEx", r.api.gemm_ex, r.error);
    resolve(lib, "cublasGemmStridedBatchedEx", r.api.gemm_strided_batched_ex, r.error);
    resolve(lib, "cublasGetStatusString", r.api.status_string, r.error);
    return r;  // the library stays loaded for the process
  }();
  return l;
}

}  // namespace

const CublasApi& cublas_api() {
  const Loaded& l = loaded();
  EMBER_CHECK(l.error.empty(), "cuBLAS: ", l.error);
  return l.api;
}

bool cublas_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

cublasHandle_t cublas_handle(int device, cudaStream_t stream) {
  const CublasApi& api = cublas_api();
  // Per thread: a handle must not be used by two threads at once. Never destroyed (destroying at
  // thread exit can race the driver's teardown at process exit).
  thread_local std::map<int, cublasHandle_t> handles;
  cublasHandle_t& h = handles[device];
  if (!h) {
    DeviceGuard g(Device::cuda(device));
    EMBER_CUBLAS_CHECK(api.create(&h));
    // Full fp32 by default: TF32 changes results at the 1e-3 level, which the GPU tests and users
    // comparing with the CPU would see. The native kernels' tf32 path is a separate choice.
    EMBER_CUBLAS_CHECK(api.set_math_mode(h, CUBLAS_DEFAULT_MATH));
  }
  EMBER_CUBLAS_CHECK(api.set_stream(h, stream));
  return h;
}

namespace detail {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

const char* cublas_status_message(cublasStatus_t s) {
  const Loaded& l = loaded();
  if (l.error.empty()) return l.api.status_string(s);
  return "cuBLAS not loaded, no message";
}

}  // namespace detail

}  // namespace ember::cuda
