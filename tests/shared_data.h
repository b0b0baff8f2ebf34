// Tests that read the data beside the repository (../shared/data: the Philly and 60-job traces)
// skip where it is absent, as in a clone made without it, but not in CI: there scripts/test.sh sets
// EMBER_REQUIRE_SHARED_DATA=1, and a missing file fails the test, so that a moved or lost trace
// cannot pass as a skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace test_util {

inline bool shared_data_required() {
  const char* v = std::getenv("EMBER_REQUIRE_SHARED_DATA");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace test_util

// In a test body: skip (or, under EMBER_REQUIRE_SHARED_DATA=1, fail) when `path` does not exist.
#define EMBER_NEEDS_SHARED_FILE(path)                                                                            \
  do {                                                                                                           \
    if (!std::filesystem::exists(path)) {                                                                        \
      if (test_util::shared_data_required()) FAIL() << "missing " << (path) << " (EMBER_REQUIRE_SHARED_DATA=1)"; \
      GTEST_SKIP() << "no " << (path);                                                                           \
    }                                                                                                            \
  } while (0)
