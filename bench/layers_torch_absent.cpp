// bench/layers' reference side when CMake found no libtorch: every row says "n/a".
#include "bench/layers_ref.h"

namespace ember::bench::torchref {

bool available() {
  return false;
}
std::string version() {
  return "not found at configure time";
}
void set_threads(int) {}
Call conv2d_forward(const ConvShape&) {
  return {};
}
Call conv2d_backward(const ConvShape&) {
  return {};
}
Call max_pool2d_forward(const PoolShape&) {
  return {};
}
Call max_pool2d_backward(const PoolShape&) {
  return {};
}
Call lstm_forward(int64_t, int64_t, int64_t) {
  return {};
}
Call lstm_forward_backward(int64_t, int64_t, int64_t) {
  return {};
}
Call optimizer_step(const std::string&, const int64_t*, int) {
  return {};
}

}  // namespace ember::bench::torchref
