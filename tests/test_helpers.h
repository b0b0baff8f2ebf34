// Helpers every test suite uses: capturing an ember::Error's message, checking that an error
// names its op, reading a tensor as doubles, asserting a float64 gradcheck, and running a scope
// with a set number of threads or environment variable.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace test_util {

// Runs a scope with n threads (Ember's and OpenBLAS's), so that the split paths of a kernel run
// whatever the machine's core count; the count before is put back at the end.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : prev_(ember::get_num_threads()) { ember::set_num_threads(n); }
  ~ScopedThreads() { ember::set_num_threads(prev_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int prev_;
};

// Sets an environment variable for a scope (nullptr: unsets it), putting back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) prev_ = v;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (prev_)
      ::setenv(name_.c_str(), prev_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> prev_;
};

// The message of the ember::Error that f throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "";
}

inline bool has(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

// Expects f to throw an ember::Error whose message contains `op` (and `part`, when given).
inline void expect_error(const std::function<void()>& f, const std::string& op, const std::string& part = "") {
  try {
    f();
    ADD_FAILURE() << "no ember::Error thrown (expected one naming " << op << ")";
  } catch (const ember::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(op), std::string::npos) << msg;
    if (!part.empty()) {
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  }
}

inline std::vector<double> vec(const ember::Tensor& t) {
  return t.to_vector<double>();
}

inline void check_grad(const std::function<ember::Tensor(const std::vector<ember::Tensor>&)>& f,
                       const std::vector<ember::Tensor>& in) {
  auto r = ember::gradcheck(f, in);
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace test_util
