// CPU sort and topk along any dim. Each fiber along dim becomes a buffer of unsigned keys whose
// integer order is the wanted order (NaN above +inf, -0 equal to +0, bits flipped for largest
// first) with the element's position in the low bits, so that plain integer sorting is both fast
// and stable. topk selects with nth_element first and sorts only k entries.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/index_walk.h"
#include "core/index_kernels.h"

namespace ember {

namespace {

uint32_t float_key(float x) {
  if (std::isnan(x)) return UINT32_MAX;
  x += 0.0f;  // -0 -> +0
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

uint64_t double_key(double x) {
  if (std::isnan(x)) return UINT64_MAX;
  x += 0.0;
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & (uint64_t{1} << 63)) ? ~u : (u | (uint64_t{1} << 63));
}

template <typename T>
auto sort_key(T x) {
  if constexpr (std::is_same_v<T, double>)
    return double_key(x);
  else if constexpr (std::is_same_v<T, int64_t>)
    return static_cast<uint64_t>(x) ^ (uint64_t{1} << 63);
  else if constexpr (std::is_same_v<T, int32_t>)
    return static_cast<uint32_t>(x) ^ 0x80000000u;
  else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, bool>)
    return static_cast<uint32_t>(x);
  else
    return float_key(static_cast<float>(x));  // float, Half, BFloat16
}

// Orders `buf` (n entries) so its first k are the k smallest, sorted.
template <typename E>
void order_prefix(std::vector<E>& buf, int64_t k) {
  if (k < static_cast<int64_t>(buf.size())) {
    std::nth_element(buf.begin(), buf.begin() + k, buf.end());
    std::sort(buf.begin(), buf.begin() + k);
  } else {
    std::sort(buf.begin(), buf.end());
  }
}

template <typename T>
void sort_typed(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool largest) {
  using U = decltype(sort_key(T{}));
  const int64_t n = a.size(dim), k = values.size(dim);
  const int64_t as = a.stride(dim), vs = values.stride(dim), is = indices.stride(dim);
  const T* x = static_cast<const T*>(a.raw_data());
  T* v = static_cast<T*>(values.raw_data());
  int64_t* ix = indices.data_ptr<int64_t>();
  const U flip = largest ? static_cast<U>(~U{0}) : U{0};
  const bool packed = sizeof(U) == 4 && n <= int64_t{UINT32_MAX};
  cpu::for_each_fiber<3>(a.shape(), dim, {&a.strides(), &values.strides(), &indices.strides()},
                         std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](const std::array<int64_t, 3>& off) {
                           const T* row = x + off[0];
                           T* vo = v + off[1];
                           int64_t* io = ix + off[2];
                           if (packed) {
                             thread_local std::vector<uint64_t> buf;
                             buf.resize(static_cast<size_t>(n));
                             for (int64_t i = 0; i < n; ++i)
                               buf[i] = (static_cast<uint64_t>(sort_key(row[i * as]) ^ flip) << 32) |
                                        static_cast<uint64_t>(i);
                             order_prefix(buf, k);
                             for (int64_t i = 0; i < k; ++i) {
                               const int64_t src = static_cast<int64_t>(buf[i] & 0xFFFFFFFFu);
                               vo[i * vs] = row[src * as];
                               io[i * is] = src;
                             }
                           } else {
                             thread_local std::vector<std::pair<uint64_t, int64_t>> buf;
                             buf.resize(static_cast<size_t>(n));
                             for (int64_t i = 0; i < n; ++i)
                               buf[i] = {static_cast<uint64_t>(sort_key(row[i * as]) ^ flip), i};
                             order_prefix(buf, k);
                             for (int64_t i = 0; i < k; ++i) {
                               vo[i * vs] = row[buf[i].second * as];
                               io[i * is] = buf[i].second;
                             }
                           }
                         });
}

void cpu_sort(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool largest) {
  if (values.numel() == 0) return;
  EMBER_DISPATCH_ALL(a.dtype(), "sort", [&] { sort_typed<scalar_t>(values, indices, a, dim, largest); });
}

}  // namespace

EMBER_REGISTER_KERNEL(sort_stub, CPU, cpu_sort);

}  // namespace ember
