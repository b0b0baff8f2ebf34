// GCC 12.2 miscompiles aggregate initialisation when its SLP vectoriser emits AVX-512 code: a
// defaulted struct passed by value arrives with one member overwritten by its neighbour's value
// (the reproducer printed "2 2 2 0" for "2 2 0 0"), which sent pooling, padding and convolution
// shapes wrong on AVX-512 machines. This translation unit is compiled with AVX-512 flags and
// passes each case by value through a noinline call; slp_aggregate_main.cpp, compiled for the
// default target, makes the reference copies and compares. Built twice (tests/CMakeLists.txt):
//   fenced  with the avx512 kernels' own flags: every case must match the reference.
//   bare    with -march=x86-64-v4 alone: where that miscompiles, the build must be fencing this
//           compiler (EMBER_GCC_SLP_BUG in cmake/EmberCpuDispatch.cmake), or the test fails.
#include <string>
#include <vector>

#include "slp_aggregate_cases.h"

namespace {

#define SLP_BY_VALUE(name, type, describe)                        \
  __attribute__((noinline)) std::string name##_by_value(type v) { \
    return slp_cases::describe(v);                                \
  }
SLP_AGGREGATE_CASES(SLP_BY_VALUE)
#undef SLP_BY_VALUE

}  // namespace

std::vector<std::string> slp_by_value_descriptions() {
  std::vector<std::string> got;
#define SLP_CALL(name, type, describe) got.push_back(name##_by_value(type{}));
  SLP_AGGREGATE_CASES(SLP_CALL)
#undef SLP_CALL
  return got;
}
