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
double conv2d_forward(const ConvShape&) {
  return 0;
}
double conv2d_backward(const ConvShape&) {
  return 0;
}
double max_pool2d_forward(const PoolShape&) {
  return 0;
}
double max_pool2d_backward(const PoolShape&) {
  return 0;
}
double lstm_forward(int64_t, int64_t, int64_t) {
  return 0;
}
double lstm_forward_backward(int64_t, int64_t, int64_t) {
  return 0;
}
double optimizer_step(const std::string&, const int64_t*, int) {
  return 0;
}

}  // namespace ember::bench::torchref
