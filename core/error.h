// ember::Error is the one exception type for user mistakes (bad shapes, dtypes, files, flags).
// Its message names the thing and what was expected; EMBER_CHECK builds it from any streamable
// pieces so that call sites stay one line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
// Never inlined: messages are built on the error path only, and an out-of-line copy in every
// object keeps the per-level copies of core/cpu/ files alike (one level inlining it where another
// does not left a weak symbol that only the AVX-512 copy defined).
template <typename... Args>
[[gnu::noinline, gnu::cold]] std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace ember

// Throws ember::Error with the concatenated message when cond is false.
#define EMBER_CHECK(cond, ...)                                    \
  do {                                                            \
    if (!(cond)) [[unlikely]]                                     \
      throw ::ember::Error(::ember::detail::concat(__VA_ARGS__)); \
  } while (0)

#define EMBER_FAIL(...) throw ::ember::Error(::ember::detail::concat(__VA_ARGS__))
