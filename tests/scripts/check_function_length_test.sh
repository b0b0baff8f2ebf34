#!/usr/bin/env bash
# Tests scripts/check-function-length.py on small files: a function one line over the limit fails
# and is named with its first line; one at the limit passes; so do long classes, namespaces and
# initialiser lists made of short functions, and braces in comments, strings and for headers; a
# long lambda and a long constructor (counted from its signature) fail; a folder's CUDA files
# (.cu, .cuh) are checked, its build trees and hidden folders are not; an --allow file's long
# functions pass, and an --allow file with none (or not checked at all) fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
check="python3 $root/scripts/check-function-length.py --max 10"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
body() { for ((i = 0; i < $1; ++i)); do echo "  x += $i;"; done; }

# A function of exactly 10 lines: signature, 8 statements, closing brace.
{ echo "int ok(int x) {"; body 8; echo "}"; } >"$work/at_limit.cpp"
$check "$work/at_limit.cpp" >/dev/null || fail "a 10-line function was refused"

{ echo "template <class T>"; echo "int too_long(T x) {"; body 8; echo "}"; } >"$work/over.cpp"
if $check "$work/over.cpp" 2>"$work/err" >/dev/null; then fail "an 11-line function passed"; fi
grep -q "over.cpp:1: too_long is 11 lines (at most 10)" "$work/err" || fail "unexpected report: $(cat "$work/err")"

# Many short functions in a long struct and namespace; braces that open no body.
cat >"$work/short.cpp" <<'CPP'
#include <string>
#define BLOCK {
namespace n {
// a comment { that opens nothing
struct S {
  int a = 0, b{1};
  int f(int x) const { return x; }
  int g(int x) { for (int i = 0; i < x; ++i) { x += i; } return x; }
  std::string s() { return "{ not a brace"; }
  char c() { return '{'; }
  S(int v) : a(v), b{v} {}
  int h(const S& z = {}) { return z.a; }
  int k() noexcept { return 1; }
  auto l() -> int { return 2; }
  int m() { return 3; }
  int o() { return 4; }
};
}  // namespace n
CPP
$check "$work/short.cpp" >/dev/null || fail "short functions in a long struct were refused: $($check "$work/short.cpp" 2>&1)"

# A long lambda, and a constructor whose body is short but whose signature and initialisers are not.
{ echo "void f() {"; echo "  auto g = [&](int x) {"; body 10; echo "  };"; echo "}"; } >"$work/lambda.cpp"
if $check "$work/lambda.cpp" 2>"$work/err" >/dev/null; then fail "a 12-line lambda passed"; fi
grep -q "lambda.cpp:2: lambda is 12 lines" "$work/err" || fail "unexpected report: $(cat "$work/err")"
{ echo "struct T {"; echo "  T(int x)"; for ((i = 0; i < 10; ++i)); do echo "      , m$i(x)"; done; echo "  {}"; echo "};"; } \
  >"$work/ctor.cpp"
if $check "$work/ctor.cpp" 2>"$work/err" >/dev/null; then fail "a 12-line constructor passed"; fi
grep -q "ctor.cpp:2: T is 12 lines" "$work/err" || fail "unexpected report: $(cat "$work/err")"

# A folder is searched for sources; an empty one is an error, not a pass.
mkdir "$work/empty"
if $check "$work/empty" >/dev/null 2>&1; then fail "a folder without sources passed"; fi

# CUDA sources in a folder: a long kernel (in a .cu) and a long device helper (in a .cuh) fail.
mkdir -p "$work/tree/cuda"
{ echo "__global__ void __launch_bounds__(256) long_kernel(float* x) {"; body 10; echo "}"; } \
  >"$work/tree/cuda/k.cu"
{ echo "__device__ __forceinline__ float long_helper(float x) {"; body 10; echo "}"; } >"$work/tree/cuda/k.cuh"
if $check "$work/tree" 2>"$work/err" >/dev/null; then fail "long CUDA functions passed"; fi
grep -q "k.cu:1: long_kernel is 12 lines" "$work/err" || fail "the .cu kernel was not reported: $(cat "$work/err")"
grep -q "k.cuh:1: long_helper is 12 lines" "$work/err" || fail "the .cuh helper was not reported: $(cat "$work/err")"

# A build tree (generated sources) and hidden folders inside a checked folder are left out.
mkdir -p "$work/src/build-x" "$work/src/.venv"
cp "$work/at_limit.cpp" "$work/src/"
touch "$work/src/build-x/CMakeCache.txt"
cp "$work/over.cpp" "$work/src/build-x/generated.cpp"
cp "$work/over.cpp" "$work/src/.venv/vendored.cpp"
out=$($check "$work/src" 2>&1) || fail "a build tree or hidden folder was checked: $out"
grep -q "1 files" <<<"$out" || fail "unexpected count: $out"

# The allow-list: a listed file's long function passes (and is still named); a listed file with no
# long function, or one that is not checked, fails, so that the list is emptied when it is split.
out=$($check --allow "$work/over.cpp" "$work/over.cpp" "$work/at_limit.cpp" 2>&1) || fail "an allowed file failed: $out"
grep -q "over.cpp:1: too_long is 11 lines (allowed for now" <<<"$out" || fail "the allowed function was not named: $out"
if $check --allow "$work/at_limit.cpp" "$work/at_limit.cpp" 2>"$work/err" >/dev/null; then
  fail "an allowed file without a long function passed"
fi
grep -q "take it off the allow-list" "$work/err" || fail "unexpected report: $(cat "$work/err")"
if $check --allow "$work/short.cpp" "$work/at_limit.cpp" 2>"$work/err" >/dev/null; then
  fail "an allowed file that was not checked passed"
fi
grep -q "is not among the files checked" "$work/err" || fail "unexpected report: $(cat "$work/err")"
echo "ok"
