#include "layers/pooling.h"

#include "layers/functional.h"

namespace ember::nn {

namespace {

Pool2dParams params_of(const char* layer, Size2 k, const Pool2dOptions& o) {
  EMBER_CHECK(k.h > 0 && k.w > 0, layer, ": kernel_size must be positive, got ", k.str());
  EMBER_CHECK(o.stride.h >= 0 && o.stride.w >= 0, layer, ": stride must be positive (or 0 for the kernel size), got ",
              o.stride.str());
  EMBER_CHECK(o.padding.h >= 0 && o.padding.w >= 0 && 2 * o.padding.h <= k.h && 2 * o.padding.w <= k.w, layer,
              ": padding ", o.padding.str(), " must be non-negative and at most half the kernel size ", k.str());
  Pool2dParams p;
  p.kernel = k.arr();
  p.stride = {o.stride.h == 0 ? k.h : o.stride.h, o.stride.w == 0 ? k.w : o.stride.w};
  p.padding = o.padding.arr();
  p.ceil_mode = o.ceil_mode;
  p.count_include_pad = o.count_include_pad;
  return p;
}

std::string repr_of(Size2 k, const Pool2dOptions& o) {
  Size2 stride = o.stride == Size2(0) ? k : o.stride;
  std::string s = "kernel_size=" + k.str() + ", stride=" + stride.str() + ", padding=" + o.padding.str();
  if (o.ceil_mode) s += ", ceil_mode=true";
  return s;
}

}  // namespace

MaxPool2d::MaxPool2d(Size2 k, Pool2dOptions o) : kernel_size(k), options(o) {
  params_of("MaxPool2d", k, o);
}

Pool2dParams MaxPool2d::params() const {
  return params_of("MaxPool2d", kernel_size, options);
}

Tensor MaxPool2d::forward(const Tensor& input) {
  return F::max_pool2d(input, params());
}

std::string MaxPool2d::extra_repr() const {
  return repr_of(kernel_size, options);
}

AvgPool2d::AvgPool2d(Size2 k, Pool2dOptions o) : kernel_size(k), options(o) {
  params_of("AvgPool2d", k, o);
}

Tensor AvgPool2d::forward(const Tensor& input) {
  return F::avg_pool2d(input, params_of("AvgPool2d", kernel_size, options));
}

std::string AvgPool2d::extra_repr() const {
  return repr_of(kernel_size, options) + (options.count_include_pad ? "" : ", count_include_pad=false");
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return F::adaptive_avg_pool2d(input, output_size.arr());
}

}  // namespace ember::nn
