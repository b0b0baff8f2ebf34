// CPU kernels for index_select / index_add, gather / scatter, masked_fill, one_hot and tril/triu.
// Copies move raw elements (an unsigned type of the element's size), so one instantiation serves
// every dtype of that size. Accumulating kernels split work only between disjoint destinations
// and walk the index in order inside each, which makes them deterministic.
#include <climits>
#include <cstring>

#include "core/copy.h"
#include "core/cpu/index_walk.h"
#include "core/cpu/loops.h"
#include "core/index_kernels.h"
#include "core/raw_dispatch.h"
#include "core/shape_around.h"

namespace ember {

namespace {

bool in_parallel() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return true;
#endif
}

void cpu_index_range(const Tensor& index, int64_t* lo, int64_t* hi) {
  const int64_t* p = index.data_ptr<int64_t>();
  const int64_t n = index.numel();
  int64_t mn = INT64_MAX, mx = INT64_MIN;
  const bool par = n >= 4 * kParallelGrain && !in_parallel();
#pragma omp parallel for simd reduction(min : mn) reduction(max : mx) if (par)
  for (int64_t i = 0; i < n; ++i) {
    mn = std::min(mn, p[i]);
    mx = std::max(mx, p[i]);
  }
  *lo = mn;
  *hi = mx;
}

void cpu_index_select(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index) {
  const Around s = around(src.shape(), dim);
  const int64_t m = index.numel(), rows = s.outer * m, inner = s.inner;
  if (rows == 0 || inner == 0) return;
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_raw(src.itemsize(), "index_select", [&](auto tag) {
    using R = decltype(tag);
    const R* x = static_cast<const R*>(src.raw_data());
    R* y = static_cast<R*>(out.raw_data());
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t b, int64_t e) {
      int64_t o = b / m, j = b % m;
      for (int64_t r = b; r < e; ++r) {
        const R* from = x + (o * s.size + idx[j]) * inner;
        R* to = y + r * inner;
        if (inner == 1)
          *to = *from;
        else
          std::memcpy(to, from, sizeof(R) * static_cast<size_t>(inner));
        if (++j == m) {
          j = 0;
          ++o;
        }
      }
    });
  });
}

template <typename T>
void add_row(T* __restrict to, const T* __restrict from, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] += from[i];
}

void cpu_index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const Around d = around(out.shape(), dim);
  const int64_t m = index.numel(), inner = d.inner;
  if (d.outer == 0 || m == 0 || inner == 0) return;
  const int64_t* idx = index.data_ptr<int64_t>();
  EMBER_DISPATCH_NUMERIC(out.dtype(), "index_add", [&] {
    using T = scalar_t;
    T* y = out.data_ptr<T>();
    const T* x = src.data_ptr<T>();
    // Adds the source rows whose destination lies in [lo, hi) of slice o, in index order.
    auto add_rows = [&](int64_t o, int64_t lo, int64_t hi) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t t = idx[j];
        if (t < lo || t >= hi) continue;
        add_row(y + (o * d.size + t) * inner, x + (o * m + j) * inner, inner);
      }
    };
    const int64_t work = d.outer * m * inner;
    if (work < kParallelGrain || get_num_threads() == 1) {
      for (int64_t o = 0; o < d.outer; ++o) add_rows(o, 0, d.size);
    } else if (d.outer >= get_num_threads()) {
      parallel_for(0, d.outer, 1, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) add_rows(o, 0, d.size);
      });
    } else {
      // Few slices (an embedding table): threads own disjoint destination rows and each scans
      // the whole index.
      for (int64_t o = 0; o < d.outer; ++o)
        parallel_for(0, d.size, 1, [&](int64_t b, int64_t e) { add_rows(o, b, e); });
    }
  });
}

void cpu_gather(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index) {
  const int64_t len = index.size(dim);
  if (out.numel() == 0) return;
  const int64_t os = out.stride(dim), ss = src.stride(dim), is = index.stride(dim);
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_raw(src.itemsize(), "gather", [&](auto tag) {
    using R = decltype(tag);
    const R* x = static_cast<const R*>(src.raw_data());
    R* y = static_cast<R*>(out.raw_data());
    cpu::for_each_fiber<3>(index.shape(), dim, {&out.strides(), &src.strides(), &index.strides()},
                           kParallelGrain / std::max<int64_t>(len, 1), [&](const std::array<int64_t, 3>& off) {
                             R* o = y + off[0];
                             const R* s = x + off[1];
                             const int64_t* ip = idx + off[2];
                             for (int64_t k = 0; k < len; ++k) o[k * os] = s[ip[k * is] * ss];
                           });
  });
}

template <typename T, typename Op>
void scatter_typed(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, const Op& op) {
  const int64_t len = index.size(dim);
  const int64_t os = out.stride(dim), ss = src.stride(dim), is = index.stride(dim);
  const int64_t* idx = index.data_ptr<int64_t>();
  const T* x = static_cast<const T*>(src.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  // A fiber along dim writes only into out's matching fiber, so fibers run in parallel and each
  // applies its writes in index order.
  cpu::for_each_fiber<3>(index.shape(), dim, {&out.strides(), &src.strides(), &index.strides()},
                         kParallelGrain / std::max<int64_t>(len, 1), [&](const std::array<int64_t, 3>& off) {
                           T* o = y + off[0];
                           const T* s = x + off[1];
                           const int64_t* ip = idx + off[2];
                           for (int64_t k = 0; k < len; ++k) op(o[ip[k * is] * os], s[k * ss]);
                         });
}

void cpu_scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  if (index.numel() == 0) return;
  if (accumulate) {
    EMBER_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] {
      scatter_typed<scalar_t>(out, dim, index, src, [](scalar_t& o, scalar_t v) { o += v; });
    });
  } else {
    dispatch_raw(out.itemsize(), "scatter", [&](auto tag) {
      using R = decltype(tag);
      scatter_typed<R>(out, dim, index, src, [](R& o, R v) { o = v; });
    });
  }
}

void cpu_masked_fill(const Tensor& out, const Tensor& a, const Tensor& mask, double value) {
  EMBER_DISPATCH_ALL(out.dtype(), "masked_fill", [&] {
    using T = scalar_t;
    const T v = cast_value<T>(value);
    cpu::map2<T, T, bool>(out, a, mask, [v](T x, bool m) { return m ? v : x; });
  });
}

void cpu_one_hot(const Tensor& out, const Tensor& labels) {
  const int64_t n = labels.numel(), classes = out.size(-1);
  int64_t* y = out.data_ptr<int64_t>();
  const int64_t* l = labels.data_ptr<int64_t>();
  parallel_for(0, n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(classes, 1)), [&](int64_t b, int64_t e) {
    std::memset(y + b * classes, 0, sizeof(int64_t) * static_cast<size_t>((e - b) * classes));
    for (int64_t i = b; i < e; ++i) y[i * classes + l[i]] = 1;
  });
}

void cpu_trilu(const Tensor& out, const Tensor& a, int64_t diagonal, bool upper) {
  const int64_t nd = a.dim(), rows_per = a.size(-2), cols = a.size(-1);
  if (out.numel() == 0) return;
  const int64_t rows = out.numel() / cols;
  const int64_t sr = a.stride(-2), sc = a.stride(-1);
  // The offset of batch entry b in a (leading dims walked with a's strides).
  auto batch_offset = [&](int64_t b) {
    int64_t off = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      off += (b % a.size(d)) * a.stride(d);
      b /= a.size(d);
    }
    return off;
  };
  dispatch_raw(a.itemsize(), "tril/triu", [&](auto tag) {
    using R = decltype(tag);
    const R* x = static_cast<const R*>(a.raw_data());
    R* y = static_cast<R*>(out.raw_data());
    parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / cols), [&](int64_t b, int64_t e) {
      int64_t batch = b / rows_per, base = batch_offset(batch);
      for (int64_t r = b; r < e; ++r) {
        if (r / rows_per != batch) {
          batch = r / rows_per;
          base = batch_offset(batch);
        }
        const int64_t i = r % rows_per;
        // Kept columns: j - i <= diagonal (lower) or j - i >= diagonal (upper); the others are 0,
        // whose bit pattern is all zeros in every dtype.
        const int64_t lo = upper ? std::clamp<int64_t>(i + diagonal, 0, cols) : 0;
        const int64_t hi = upper ? cols : std::clamp<int64_t>(i + diagonal + 1, 0, cols);
        const R* src = x + base + i * sr;
        R* dst = y + r * cols;
        for (int64_t j = 0; j < lo; ++j) dst[j] = 0;
        if (sc == 1) {
          for (int64_t j = lo; j < hi; ++j) dst[j] = src[j];
        } else {
          for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * sc];
        }
        for (int64_t j = hi; j < cols; ++j) dst[j] = 0;
      }
    });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(index_range_stub, CPU, cpu_index_range);
EMBER_REGISTER_KERNEL(index_select_stub, CPU, cpu_index_select);
EMBER_REGISTER_KERNEL(index_add_stub, CPU, cpu_index_add);
EMBER_REGISTER_KERNEL(gather_stub, CPU, cpu_gather);
EMBER_REGISTER_KERNEL(scatter_stub, CPU, cpu_scatter);
EMBER_REGISTER_KERNEL(masked_fill_stub, CPU, cpu_masked_fill);
EMBER_REGISTER_KERNEL(one_hot_stub, CPU, cpu_one_hot);
EMBER_REGISTER_KERNEL(trilu_stub, CPU, cpu_trilu);

}  // namespace ember
