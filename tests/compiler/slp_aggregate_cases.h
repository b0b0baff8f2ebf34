// The aggregates of tests/compiler/slp_aggregate_test.cpp: GCC 12.2's reproducer and the
// parameter structs Ember passes by value or builds from defaults in its kernels. describe()
// prints every member, so the copy that crossed a by-value call can be compared with one made in
// a translation unit compiled without AVX-512. Included by both; everything is internal to each.
#pragma once

#include <array>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/nn_kernels.h"
#include "core/ops/nn.h"

namespace slp_cases {

// The reproducer: -O2 -march=x86-64-v4 on GCC 12.2 passes {2, 2, 2, 0} for {k, s}.
struct Reproducer {
  std::array<long, 2> k{2, 2};
  std::array<long, 2> s{0, 0};
  std::array<long, 2> p{0, 0};
  bool c = false;
};

template <typename A>
static void put_array(std::ostringstream& o, const A& a) {
  o << '{';
  for (auto v : a) o << v << ',';
  o << '}';
}

[[maybe_unused]] static std::string describe_reproducer(const Reproducer& r) {
  std::ostringstream o;
  put_array(o, r.k), put_array(o, r.s), put_array(o, r.p), o << r.c;
  return o.str();
}
[[maybe_unused]] static std::string describe_pool(const ember::Pool2dParams& p) {
  std::ostringstream o;
  put_array(o, p.kernel), put_array(o, p.stride), put_array(o, p.padding), o << p.ceil_mode << p.count_include_pad;
  return o.str();
}
[[maybe_unused]] static std::string describe_conv(const ember::Conv2dParams& p) {
  std::ostringstream o;
  put_array(o, p.stride), put_array(o, p.padding), put_array(o, p.dilation), o << p.groups << ',' << p.same_padding;
  return o.str();
}
[[maybe_unused]] static std::string describe_conv_t(const ember::ConvTranspose2dParams& p) {
  std::ostringstream o;
  put_array(o, p.stride), put_array(o, p.padding), put_array(o, p.output_padding), put_array(o, p.dilation);
  o << p.groups;
  return o.str();
}
[[maybe_unused]] static std::string describe_conv_geometry(const ember::ConvGeometry& g) {
  std::ostringstream o;
  for (int64_t v : {g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.OH, g.OW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.groups})
    o << v << ',';
  return o.str();
}
[[maybe_unused]] static std::string describe_pool_geometry(const ember::Pool2dGeometry& g) {
  std::ostringstream o;
  for (int64_t v : {g.P, g.H, g.W, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw}) o << v << ',';
  o << g.count_include_pad;
  return o.str();
}
[[maybe_unused]] static std::string describe_batch_norm(const ember::BatchNormArgs& a) {
  std::ostringstream o;
  o << a.training << ',' << a.momentum << ',' << a.eps;
  return o.str();
}
[[maybe_unused]] static std::string describe_cross_entropy(const ember::CrossEntropyArgs& a) {
  std::ostringstream o;
  o << a.ignore_index << ',' << a.label_smoothing << ',' << a.prob_target;
  return o.str();
}

}  // namespace slp_cases

// X(name, type, describe): every case, in one list for both translation units.
#define SLP_AGGREGATE_CASES(X)                                              \
  X(reproducer, slp_cases::Reproducer, describe_reproducer)                 \
  X(pool2d_params, ember::Pool2dParams, describe_pool)                      \
  X(conv2d_params, ember::Conv2dParams, describe_conv)                      \
  X(conv_transpose2d_params, ember::ConvTranspose2dParams, describe_conv_t) \
  X(conv_geometry, ember::ConvGeometry, describe_conv_geometry)             \
  X(pool2d_geometry, ember::Pool2dGeometry, describe_pool_geometry)         \
  X(batch_norm_args, ember::BatchNormArgs, describe_batch_norm)             \
  X(cross_entropy_args, ember::CrossEntropyArgs, describe_cross_entropy)
