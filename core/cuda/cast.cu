// The dtype-converting copy kernel (core/cuda/cast.h): one functor per (to, from) pair through
// the elementwise machinery, so contiguous same-width pairs get vector loads and views go
// through the offset calculator.
#include "core/copy.h"
#include "core/cuda/cast.h"
#include "core/cuda/device_api.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"

namespace ember::cuda {
namespace {

template <typename To, typename From>
struct CastF {
  EMBER_DEVICE To operator()(From v) const { return cast_element<To>(v); }
};

}  // namespace

void cast_copy(const Tensor& dst, const Tensor& src) {
  EMBER_CHECK(dst.shape() == src.shape(), "copy_: shapes ", shape_str(dst.shape()), " and ", shape_str(src.shape()),
              " differ");
  DeviceGuard guard(dst.device());
  EMBER_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using To = kernel_t<scalar_t>;
    EMBER_DISPATCH_ALL(src.dtype(), "copy_", [&] {
      using From = kernel_t<scalar_t>;
      map<To, From>(CastF<To, From>{}, dst, src);
    });
  });
}

}  // namespace ember::cuda
