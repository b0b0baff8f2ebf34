// The op table's test program (label ops). One run covers one group of backends:
//   ember_ops_tests --group=cpu|emu|cuda   every row on each backend of the group against the
//                                          float64 CPU reference, forward and backward, contiguous
//                                          and strided; then the coverage check for the group
//   ember_ops_tests --group=gradcheck      finite differences in float64 on the CPU, per row
//   ember_ops_tests --group=... --perf [--rows=NAME,...]   a table of forward and backward times
//                                          (asserts nothing), of every row or of the rows named
//   ember_ops_tests --group=... --planted=values|small_element|overrun   one row with a planted
//                                          bug instead of the table: the harness must fail it
//                                          (ctest checks)
//   ember_ops_tests --group=harness        the comparison's own tests on crafted tensors
//   ember_ops_tests --group=... --backends=NAME,...    only those backends of the group (the
//                                          sanitizer pass runs emu_forward alone: a memory error
//                                          does not depend on the thread order)
// Tests are named Ops_<backend>.<row> (gtest filters work; the coverage check then does not run).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "backends.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/cpu_capability.h"
#include "coverage.h"
#include "op_table.h"
#include "run_row.h"

using namespace ember;
using namespace ember::ops_test;

namespace {

CpuCapability g_default_level = CpuCapability::Baseline;

const RowResult& reference_at_default_level(const OpRow& row, const Backend& for_backend) {
  pause_hits();
  if (row.cross_reference) {
    const Backend& emu = *backends_of("emu").front();
    return cross_reference(row, for_backend.group, emu.device, emu.enter, emu.leave);
  }
  const CpuCapability now = cpu_capability();
  if (now != g_default_level) set_cpu_capability(g_default_level);
  const RowResult& r = reference(row);
  if (now != g_default_level) set_cpu_capability(now);
  return r;
}

void fail_on_guard_violations(const std::string& what) {
  for (const std::string& v : take_guard_violations()) ADD_FAILURE() << what << ": out-of-bounds write: " << v;
}

class RowOnBackend : public ::testing::Test {
 public:
  RowOnBackend(const OpRow* row, const Backend* backend) : row_(row), backend_(backend) {}
  void TestBody() override {
    const std::string why = backend_->unavailable();
    if (!why.empty()) GTEST_SKIP() << "not run: " << why;
    const RowResult& want = reference_at_default_level(*row_, *backend_);
    backend_->enter();
    record_hits_as(*backend_);
    // Emulated thread orders other than forward take the contiguous layout only (the strided one
    // tests the same kernels' indexing, which the thread order does not change).
    const bool strided_too = row_->strided && (backend_->group != "emu" || backend_->name == "emu_forward");
    for (bool strided : {false, true}) {
      if (strided && !strided_too) continue;
      const std::string what = row_->name + " on " + backend_->name + (strided ? " (strided inputs)" : "");
      try {
        const RowResult got = run_on(*row_, backend_->device, strided);
        const std::string m = mismatch(got.out, want.out, tolerance_for(*row_, got.out.dtype()));
        EXPECT_TRUE(m.empty()) << what << ", forward: " << m;
        for (size_t i = 0; i < want.grads.size(); ++i) {
          if (!want.grads[i].defined()) continue;
          if (!got.grads[i].defined()) {
            ADD_FAILURE() << what << ": input " << i << " got no gradient";
            continue;
          }
          // A gradient sums over the output (broadcasts, reductions' backward): five times the row's
          // bound, and never tighter than its dtype's (an exact forward can have a rounded backward).
          const Tolerance t = tolerance_for(*row_, got.grads[i].dtype()), d = default_tolerance(got.grads[i].dtype());
          const std::string g =
              mismatch(got.grads[i], want.grads[i], {5 * std::max(t.rtol, d.rtol), 5 * std::max(t.atol, d.atol)});
          EXPECT_TRUE(g.empty()) << what << ", gradient of input " << i << ": " << g;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << " threw: " << e.what();
      }
    }
    // A row that never reached a kernel of the backend's device tested nothing there.
    EXPECT_GT(calls_on_backend(), 0u) << row_->name << " ran no kernel on " << backend_->device;
    pause_hits();
    backend_->leave();
    fail_on_guard_violations(row_->name + " on " + backend_->name);
  }

 private:
  const OpRow* row_;
  const Backend* backend_;
};

// Finite differences in float64 on the CPU: the reference's own gradients are right.
class RowGradcheck : public ::testing::Test {
 public:
  explicit RowGradcheck(const OpRow* row) : row_(row) {}
  void TestBody() override {
    const Inputs base = make_inputs(*row_);
    int64_t elements = 0;
    Inputs in;
    for (size_t i = 0; i < base.size(); ++i) {
      const Tensor& x = base[i];
      const bool differentiable = is_floating(x.dtype()) && !is_constant(*row_, i);
      Tensor c = is_floating(x.dtype()) ? x.to(DType::Float64).detach() : x;
      if (differentiable) c.requires_grad_(true), elements += x.numel();
      in.push_back(c);
    }
    if (elements == 0) GTEST_SKIP() << "skipped: no differentiable input";
    // Central differences cost two evaluations per element; larger rows have small siblings.
    if (elements > 4096)
      GTEST_SKIP() << "skipped: " << elements << " input elements (at most 4096 for finite differences)";
    const GradcheckResult r = gradcheck(row_->f, in, {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3});
    EXPECT_TRUE(r.ok) << row_->name << ": " << r.message;
  }

 private:
  const OpRow* row_;
};

// The coverage check after the whole group ran (only without a filter: a partial run reaches less).
// A group none of whose backends can run here (no GPU) still checks that every stub has a kernel
// registered for it, and says "skipped: <why>" (ctest's skip pattern) only when that check passed,
// so a missing registration is a failure there too, not a skip.
class CoverageCheck : public ::testing::Environment {
 public:
  CoverageCheck(std::vector<const Backend*> b, std::string skip) : backends_(std::move(b)), skip_(std::move(skip)) {}
  void TearDown() override {
    std::cout << "op table coverage:\n" << coverage_summary(backends_);
    const std::vector<std::string> failures = coverage_failures(backends_);
    for (const std::string& f : failures) ADD_FAILURE() << "coverage: " << f;
    if (failures.empty() && !skip_.empty()) std::cout << "skipped: " << skip_ << std::endl;
  }

 private:
  std::vector<const Backend*> backends_;
  std::string skip_;  // why no backend of the group runs here; empty when one does
};

// Rows with a planted bug, to show that the harness fails them: a result that is off on every
// backend but the reference; the same with only its smallest-magnitude element off, by a relative
// 1e-3 (the comparison once held every element to the largest one's magnitude and passed it); and
// a kernel-like write one element past a float32 output's end.
std::vector<OpRow> planted_rows(const std::string& kind) {
  if (kind == "values")
    return {
        {"planted_wrong_values",
         [](Generator& g) {
           return Inputs{rn(g, {9, 7})};
         },
         [](const Inputs& x) { return x[0].dtype() == DType::Float64 ? mul(x[0], 2.0) : add(mul(x[0], 2.0), 1e-2); }}};
  if (kind == "small_element")
    return {{"planted_small_element",
             [](Generator& g) {
               return Inputs{mul(rn(g, {9, 7}), 30.0)};
             },
             [](const Inputs& x) {
               const Tensor y = mul(x[0], 2.0);
               if (y.dtype() != DType::Float32) return y;
               NoGradGuard ng;
               std::vector<float> v = y.to(Device::cpu()).to_vector<float>();
               size_t smallest = 0;
               for (size_t i = 0; i < v.size(); ++i)
                 if (std::abs(v[i]) < std::abs(v[smallest])) smallest = i;
               v[smallest] *= 1.0f + 1e-3f;
               return from_vector<float>(v, y.shape()).to(y.device());
             },
             kByDtype, false, false, false}};
  if (kind == "overrun")
    return {{"planted_overrun",
             [](Generator& g) {
               return Inputs{rn(g, {9, 7})};
             },
             [](const Inputs& x) {
               Tensor y = mul(x[0], 2.0);
               if (y.dtype() == DType::Float32 && !y.device().is_cuda())
                 static_cast<float*>(y.raw_data())[y.numel()] = 1.0f;
               return y;
             },
             2e-4, false, false, false}};
  std::fprintf(stderr, "ember_ops_tests: --planted must be values, small_element or overrun (got '%s')\n",
               kind.c_str());
  std::exit(2);
}

void run_perf(const std::vector<const Backend*>& backends, const std::set<std::string>& only) {
  std::printf("%-36s", "row");
  for (const Backend* b : backends) std::printf(" %16s", b->name.c_str());
  std::printf("\n%-36s", "(median of 5, forward+backward, us)");
  for (size_t i = 0; i < backends.size(); ++i) std::printf(" %16s", "");
  std::printf("\n");
  for (const OpRow& row : op_table()) {
    if (!only.empty() && !only.count(row.name)) continue;
    std::printf("%-36s", row.name.c_str());
    for (const Backend* b : backends) {
      if (!b->unavailable().empty()) {
        std::printf(" %16s", "-");
        continue;
      }
      b->enter();
      std::vector<double> us;
      for (int rep = 0; rep < 6; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)run_on(row, b->device, false);
        const auto t1 = std::chrono::steady_clock::now();
        if (rep > 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      b->leave();
      std::sort(us.begin(), us.end());
      std::printf(" %16.1f", us[us.size() / 2]);
    }
    std::printf("\n");
  }
}

// The command line (after GoogleTest has taken its own flags).
struct Options {
  std::string group;
  bool perf = false;
  std::string planted;
  std::set<std::string> perf_rows, only_backends;
};

// The names in a comma-separated list, empty ones dropped.
void insert_list(const std::string& csv, std::set<std::string>& into) {
  std::string list = csv + ",";
  for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1)
    if (q > p) into.insert(list.substr(p, q - p));
}

// Reads the arguments into `o`; false (having said why) on one it does not know.
bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--group=", 0) == 0) {
      o.group = a.substr(8);
    } else if (a == "--perf") {
      o.perf = true;
    } else if (a.rfind("--rows=", 0) == 0) {
      insert_list(a.substr(7), o.perf_rows);
    } else if (a.rfind("--planted=", 0) == 0) {
      o.planted = a.substr(10);
    } else if (a.rfind("--backends=", 0) == 0) {
      insert_list(a.substr(11), o.only_backends);
    } else {
      std::fprintf(stderr,
                   "ember_ops_tests: unknown argument '%s' (expected --group=cpu|emu|cuda|gradcheck|harness, --perf, "
                   "--rows=NAME,..., --planted=values|small_element|overrun, --backends=NAME,...)\n",
                   a.c_str());
      return false;
    }
  }
  return true;
}

// The group's backends narrowed to those named in `only` (all of them when it is empty); false
// (having said why) when `only` names one the group lacks.
bool narrow_backends(std::vector<const Backend*>& backends, const std::set<std::string>& only,
                     const std::string& group) {
  if (only.empty()) return true;
  std::vector<const Backend*> kept;
  std::string names_of_group;
  for (const Backend* b : backends) {
    names_of_group += (names_of_group.empty() ? "" : ", ") + b->name;
    if (only.count(b->name)) kept.push_back(b);
  }
  for (const std::string& n : only)
    if (std::none_of(backends.begin(), backends.end(), [&](const Backend* b) { return b->name == n; })) {
      std::fprintf(stderr, "ember_ops_tests: --backends names '%s', which is no backend of group %s (%s)\n", n.c_str(),
                   group.c_str(), names_of_group.c_str());
      return false;
    }
  backends = kept;
  return true;
}

// The gradcheck group: every row that takes finite differences, as one test each.
int run_gradchecks() {
  for (const OpRow& row : op_table()) {
    if (!row.gradcheck) continue;
    ::testing::RegisterTest("OpGradcheck", row.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [r = &row]() -> ::testing::Test* { return new RowGradcheck(r); });
  }
  return RUN_ALL_TESTS();
}

// The harness's self-test: the rows with a planted fault, each of which must fail on every backend.
int run_planted(const std::vector<const Backend*>& backends, const std::string& planted) {
  static const std::vector<OpRow> rows = planted_rows(planted);
  for (const Backend* b : backends)
    for (const OpRow& row : rows)
      ::testing::RegisterTest(("Ops_" + b->name).c_str(), row.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [r = &row, b]() -> ::testing::Test* { return new RowOnBackend(r, b); });
  return RUN_ALL_TESTS();
}

// Every row on every backend; the whole table also checks the kernels' coverage.
int run_table(const std::vector<const Backend*>& backends) {
  bool any = false;
  for (const Backend* b : backends) any = any || b->unavailable().empty();
  const std::string skip = any ? std::string() : backends.front()->unavailable();
  const bool whole_table = ::testing::GTEST_FLAG(filter) == "*";
  if (!whole_table && !skip.empty()) std::cout << "skipped: " << skip << std::endl;
  for (const Backend* b : backends)
    for (const OpRow& row : op_table())
      ::testing::RegisterTest(("Ops_" + b->name).c_str(), row.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [r = &row, b]() -> ::testing::Test* { return new RowOnBackend(r, b); });
  if (whole_table) ::testing::AddGlobalTestEnvironment(new CoverageCheck(backends, skip));
  return RUN_ALL_TESTS();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Options o;
  if (!parse_options(argc, argv, o)) return 2;
  if (o.group == "harness") {
    register_comparison_tests();
    return RUN_ALL_TESTS();
  }
  if (o.group != "cpu" && o.group != "emu" && o.group != "cuda" && o.group != "gradcheck") {
    std::fprintf(stderr, "ember_ops_tests: --group must be cpu, emu, cuda, gradcheck or harness (got '%s')\n",
                 o.group.c_str());
    return 2;
  }
  g_default_level = cpu_capability();
  std::cout << "CPU: " << cpu_description() << std::endl;

  // Row names are test names and reference keys: they must be unique.
  std::set<std::string> names;
  for (const OpRow& row : op_table())
    if (!names.insert(row.name).second) {
      std::fprintf(stderr, "ember_ops_tests: two rows are named '%s'\n", row.name.c_str());
      return 1;
    }

  if (o.group == "gradcheck") return o.perf ? 0 : run_gradchecks();

  std::vector<const Backend*> backends = backends_of(o.group);
  if (!narrow_backends(backends, o.only_backends, o.group)) return 2;
  if (o.perf) {
    for (const std::string& r : o.perf_rows)
      if (!names.count(r)) {
        std::fprintf(stderr, "ember_ops_tests: --rows names '%s', which is no row of the op table\n", r.c_str());
        return 2;
      }
    run_perf(backends, o.perf_rows);
    return 0;
  }
  if (!o.planted.empty()) return run_planted(backends, o.planted);
  return run_table(backends);
}
