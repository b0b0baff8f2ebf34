// CPU reductions. The input arrives as a view [kept dims..., reduced dims...] with any strides.
// Both groups are coalesced, then one of two strategies runs without copying:
//  - rows: the innermost reduced dim is the contiguous one (or nothing is): each output reduces
//    its own runs with several independent accumulators so the loop vectorises and is not bound
//    by add latency; threads split the outputs, or split the reduced range of each output with
//    per-thread partials when there are too few outputs to go round;
//  - columns: the innermost kept dim is contiguous (reducing leading dims, as bias gradients
//    do): a block of outputs keeps a buffer of accumulators and every reduced row is added into
//    it with a vectorised loop; threads split the blocks, or the rows with per-thread partials.
// float32 sums, products, norms and variances accumulate in double. The backward helpers live
// in reduce_grad_kernel.cpp.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "core/reduce_kernels.h"

namespace ember {

namespace {

// Independent accumulators per loop: enough to hide the add latency of the vector unit.
constexpr int kLanes = 32;
// Outputs per column block: the accumulators stay in L1 while rows stream past.
constexpr int64_t kColBlock = 8192;
// Below this many contiguous outputs the column strategy's per-row overhead is not worth it.
constexpr int64_t kMinColWidth = 8;

// ------------------------------------------------------------------ layout

// A group of dims after coalescing, outermost first; never empty (a lone size-1 dim stands in).
struct Dims {
  std::vector<int64_t> size, stride;
  int64_t ndim() const { return static_cast<int64_t>(size.size()); }
  int64_t inner_size() const { return size.back(); }
  int64_t inner_stride() const { return stride.back(); }
};

Dims coalesce_dims(const Shape& shape, const Shape& strides, int64_t begin, int64_t end) {
  Dims r;
  for (int64_t d = begin; d < end; ++d) {
    if (shape[d] == 1) continue;
    if (!r.size.empty() && r.stride.back() == strides[d] * shape[d]) {
      r.size.back() *= shape[d];
      r.stride.back() = strides[d];
    } else {
      r.size.push_back(shape[d]);
      r.stride.push_back(strides[d]);
    }
  }
  if (r.size.empty()) {
    r.size.push_back(1);
    r.stride.push_back(0);
  }
  return r;
}

// Walks the flat indices of the first `nd` dims of `d` in row-major order, tracking the element
// offset without a division per step.
class Odometer {
 public:
  Odometer(const Dims& d, int64_t nd, int64_t start) : d_(d), nd_(nd), idx_(static_cast<size_t>(nd), 0) {
    for (int64_t k = nd - 1; k >= 0; --k) {
      idx_[k] = start % d.size[k];
      start /= d.size[k];
      off_ += idx_[k] * d.stride[k];
    }
  }
  int64_t offset() const { return off_; }
  void next() {
    for (int64_t k = nd_ - 1; k >= 0; --k) {
      off_ += d_.stride[k];
      if (++idx_[k] < d_.size[k]) return;
      off_ -= d_.stride[k] * d_.size[k];
      idx_[k] = 0;
    }
  }

 private:
  const Dims& d_;
  int64_t nd_;
  std::vector<int64_t> idx_;
  int64_t off_ = 0;
};

struct Layout {
  Dims kept, red;
  int64_t O = 1, R = 1;
};

Layout make_layout(const Tensor& in, int64_t nred) {
  Layout L;
  const int64_t nd = in.dim();
  L.kept = coalesce_dims(in.shape(), in.strides(), 0, nd - nred);
  L.red = coalesce_dims(in.shape(), in.strides(), nd - nred, nd);
  for (int64_t d = 0; d < nd; ++d) (d < nd - nred ? L.O : L.R) *= in.shape()[d];
  return L;
}

// Calls f(ptr, n, stride, r) for the runs of the innermost reduced dim covering the flat
// reduced range [r0, r1); r is the flat index of the run's first element.
template <typename T, typename F>
void for_each_run(const T* base, const Dims& red, int64_t r0, int64_t r1, const F& f) {
  const int64_t n_in = red.inner_size(), s_in = red.inner_stride();
  Odometer od(red, red.ndim() - 1, r0 / n_in);
  int64_t i = r0 % n_in, r = r0;
  while (r < r1) {
    const int64_t len = std::min(n_in - i, r1 - r);
    f(base + od.offset() + i * s_in, len, s_in, r);
    r += len;
    i = 0;
    od.next();
  }
}

// Calls f(ptr, r) for every reduced element index r in [r0, r1) (the column strategy's rows).
template <typename T, typename F>
void for_each_row(const T* base, const Dims& red, int64_t r0, int64_t r1, const F& f) {
  Odometer od(red, red.ndim(), r0);
  for (int64_t r = r0; r < r1; ++r, od.next()) f(base + od.offset(), r);
}

// ------------------------------------------------------------------ drivers

template <typename Red, typename T>
void run_rows(const Red& red, const T* base, const Layout& L) {
  using acc_t = typename Red::acc_t;
  const int64_t O = L.O, R = L.R;
  const int nt = get_num_threads();
  if (O < nt && R >= kParallelGrain) {
    // Few outputs, long reductions: split each output's range across the threads.
    const int64_t nchunks = std::min<int64_t>(nt, R / (kParallelGrain / 4));
    std::vector<acc_t> part(static_cast<size_t>(nchunks));
    for (int64_t o = 0; o < O; ++o) {
      const T* p = base + Odometer(L.kept, L.kept.ndim(), o).offset();
      parallel_for(0, nchunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          const int64_t r0 = R * c / nchunks, r1 = R * (c + 1) / nchunks;
          acc_t acc = red.init(r0);
          for_each_run(p, L.red, r0, r1,
                       [&](const T* q, int64_t n, int64_t s, int64_t r) { red.run(acc, q, n, s, r); });
          part[c] = acc;
        }
      });
      acc_t acc = part[0];
      for (int64_t c = 1; c < nchunks; ++c) red.merge(acc, part[c]);
      red.store(o, acc);
    }
    return;
  }
  parallel_for(0, O, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
    Odometer od(L.kept, L.kept.ndim(), b);
    for (int64_t o = b; o < e; ++o, od.next()) {
      acc_t acc = red.init(0);
      for_each_run(base + od.offset(), L.red, 0, R,
                   [&](const T* q, int64_t n, int64_t s, int64_t r) { red.run(acc, q, n, s, r); });
      red.store(o, acc);
    }
  });
}

// Rows whose reduced dims form several groups (e.g. [N, C, H, W] over N, H and W): a block of
// outputs advances through the outer reduced positions together, so each step reads the
// runs of all outputs in the block in memory order instead of jumping a large stride per
// output. Threads split the blocks, or the outer positions with per-thread partials.
template <typename Red, typename T>
void run_rows_grouped(const Red& red, const T* base, const Layout& L) {
  using acc_t = typename Red::acc_t;
  const int64_t n_in = L.red.inner_size(), s_in = L.red.inner_stride();
  const int64_t Q = L.R / n_in, O = L.O;
  const int64_t B = std::clamp<int64_t>(kParallelGrain / n_in, 1, O);
  const int64_t items = (O + B - 1) / B;
  const int nt = get_num_threads();
  int64_t qsplit = 1;
  if (items < nt && L.R * std::min(B, O) >= kParallelGrain) qsplit = std::min<int64_t>((nt + items - 1) / items, Q);
  std::vector<std::vector<acc_t>> parts(static_cast<size_t>(qsplit > 1 ? items * qsplit : 0));
  auto work = [&](int64_t w, std::vector<acc_t>& acc, std::vector<int64_t>& offs) {
    const int64_t it = w / qsplit, k = w % qsplit;
    const int64_t o0 = it * B, nb = std::min(B, O - o0);
    const int64_t q0 = Q * k / qsplit, q1 = Q * (k + 1) / qsplit;
    offs.resize(static_cast<size_t>(nb));
    Odometer ok(L.kept, L.kept.ndim(), o0);
    for (int64_t j = 0; j < nb; ++j, ok.next()) offs[j] = ok.offset();
    acc.assign(static_cast<size_t>(nb), red.init(q0 * n_in));
    Odometer oq(L.red, L.red.ndim() - 1, q0);
    for (int64_t q = q0; q < q1; ++q, oq.next())
      for (int64_t j = 0; j < nb; ++j) red.run(acc[j], base + offs[j] + oq.offset(), n_in, s_in, q * n_in);
  };
  parallel_for(0, items * qsplit, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(L.R * B, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<acc_t> acc;
                 std::vector<int64_t> offs;
                 for (int64_t w = b; w < e; ++w) {
                   work(w, acc, offs);
                   if (qsplit > 1) {
                     parts[w] = acc;
                   } else {
                     for (size_t j = 0; j < acc.size(); ++j) red.store(w * B + static_cast<int64_t>(j), acc[j]);
                   }
                 }
               });
  if (qsplit == 1) return;
  for (int64_t it = 0; it < items; ++it) {
    std::vector<acc_t>& acc = parts[it * qsplit];
    for (int64_t k = 1; k < qsplit; ++k)
      for (size_t j = 0; j < acc.size(); ++j) red.merge(acc[j], parts[it * qsplit + k][j]);
    for (size_t j = 0; j < acc.size(); ++j) red.store(it * B + static_cast<int64_t>(j), acc[j]);
  }
}

template <typename Red, typename T>
void run_columns(const Red& red, const T* base, const Layout& L) {
  using Col = typename Red::Col;
  const int64_t C = L.kept.inner_size(), R = L.R;
  const int64_t Oo = L.O / C;
  const int64_t width = std::min(C, kColBlock);
  const int64_t nblk = (C + width - 1) / width;
  const int64_t items = Oo * nblk;
  const int nt = get_num_threads();
  const int64_t kept_outer = L.kept.ndim() - 1;
  auto item_ptr = [&](int64_t item, int64_t& c0, int64_t& n) {
    const int64_t oo = item / nblk;
    c0 = (item % nblk) * width;
    n = std::min(width, C - c0);
    return base + Odometer(L.kept, kept_outer, oo).offset() + c0;
  };
  auto out_index = [&](int64_t item, int64_t c0) { return (item / nblk) * C + c0; };

  int64_t rsplit = 1;
  if (items < nt && R * width >= kParallelGrain) rsplit = std::min<int64_t>((nt + items - 1) / items, R);
  if (rsplit == 1) {
    parallel_for(0, items, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * width, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t it = b; it < e; ++it) {
                     int64_t c0, n;
                     const T* p = item_ptr(it, c0, n);
                     Col col = red.make_col(n, 0);
                     for_each_row(p, L.red, 0, R, [&](const T* row, int64_t r) { red.row(col, row, n, r); });
                     red.store_col(out_index(it, c0), col, n);
                   }
                 });
    return;
  }
  std::vector<Col> parts(static_cast<size_t>(items * rsplit));
  parallel_for(0, items * rsplit, 1, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t it = w / rsplit, k = w % rsplit;
      const int64_t r0 = R * k / rsplit, r1 = R * (k + 1) / rsplit;
      int64_t c0, n;
      const T* p = item_ptr(it, c0, n);
      Col col = red.make_col(n, r0);
      for_each_row(p, L.red, r0, r1, [&](const T* row, int64_t r) { red.row(col, row, n, r); });
      parts[w] = std::move(col);
    }
  });
  for (int64_t it = 0; it < items; ++it) {
    int64_t c0, n;
    item_ptr(it, c0, n);
    Col& acc = parts[it * rsplit];
    for (int64_t k = 1; k < rsplit; ++k) red.merge_col(acc, parts[it * rsplit + k], n);
    red.store_col(out_index(it, c0), acc, n);
  }
}

template <typename Red, typename T>
void run_reduce(const Red& red, const T* base, const Layout& L) {
  if (L.O == 0) return;
  if (L.R == 0) {
    for (int64_t o = 0; o < L.O; ++o) red.store(o, red.init(0));
    return;
  }
  const bool columns = L.kept.inner_stride() == 1 && L.kept.inner_size() >= kMinColWidth && L.red.inner_stride() != 1;
  if (columns)
    run_columns(red, base, L);
  else if (L.red.ndim() > 1)
    run_rows_grouped(red, base, L);
  else
    run_rows(red, base, L);
}

// ------------------------------------------------------------------ elementwise helpers

template <typename T>
constexpr bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

// True when x should replace the running extreme m: strictly more extreme, or the first NaN.
template <bool IsMax, typename T>
inline bool better(T x, T m) {
  if constexpr (std::is_floating_point_v<T>)
    return (IsMax ? x > m : x < m) || (x != x && m == m);
  else
    return IsMax ? x > m : x < m;
}

// The extreme's starting value: never better than any element, so the first element wins.
template <bool IsMax, typename T>
constexpr T worst_value() {
  if constexpr (std::is_floating_point_v<T>)
    return IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  else
    return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// The loops below keep kLanes independent accumulators, fold the tail into them, and combine
// them as a tree, so that neither the main loop nor the final combine is one serial chain.
// Runs shorter than kLanes take a plain loop.

// NaN-propagating extreme of map(p[i]) over a contiguous run, starting from init.
template <bool IsMax, typename T, typename Map>
T lane_extreme(const T* p, int64_t n, T init, const Map& map) {
  auto pick = [](T a, T b) { return better<IsMax>(b, a) ? b : a; };
  if (n < kLanes) {
    T m = init;
    for (int64_t i = 0; i < n; ++i) m = pick(m, map(p[i]));
    return m;
  }
  T lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] = pick(lanes[j], map(p[i + j]));
  }
  for (int64_t j = 0; i + j < n; ++j) lanes[j] = pick(lanes[j], map(p[i + j]));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = pick(lanes[j], lanes[j + w]);
  return lanes[0];
}

// Sum of map(p[i]) over a contiguous run, in Acc.
template <typename Acc, typename T, typename Map>
Acc lane_sum(const T* p, int64_t n, const Map& map) {
  if (n < kLanes) {
    Acc t = 0;
    for (int64_t i = 0; i < n; ++i) t += map(p[i]);
    return t;
  }
  Acc lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] += map(p[i + j]);
  }
  for (int64_t j = 0; i + j < n; ++j) lanes[j] += map(p[i + j]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
  return lanes[0];
}

template <typename Acc, typename T>
Acc lane_prod(const T* p, int64_t n) {
  if (n < kLanes) {
    Acc t = 1;
    for (int64_t i = 0; i < n; ++i) t *= static_cast<Acc>(p[i]);
    return t;
  }
  Acc lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = 1;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] *= static_cast<Acc>(p[i + j]);
  }
  for (int64_t j = 0; i + j < n; ++j) lanes[j] *= static_cast<Acc>(p[i + j]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] *= lanes[j + w];
  return lanes[0];
}

// ------------------------------------------------------------------ reducers
// Each reducer gives the drivers: acc_t, init(r0), run(acc, ptr, n, stride, r) over a run,
// merge(acc, later), store(o, acc); and for columns a Col state with make_col(n, r0),
// row(col, ptr, n, r), merge_col(col, later, n), store_col(o0, col, n).

// sum of map(x) then finish(sum): sum, mean, and the 1-, 2- and p-norms.
template <typename T, typename Acc, typename OutT, typename Map, typename Finish>
struct SumReducer {
  OutT* out;
  Map map;
  Finish finish;
  using acc_t = Acc;
  struct Col {
    std::vector<Acc> a;
  };

  Acc init(int64_t) const { return 0; }
  void run(Acc& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    if (s == 1) {
      acc += lane_sum<Acc>(p, n, map);
    } else {
      Acc t = 0;
      for (int64_t i = 0; i < n; ++i) t += map(p[i * s]);
      acc += t;
    }
  }
  void merge(Acc& a, const Acc& b) const { a += b; }
  void store(int64_t o, Acc a) const { out[o] = static_cast<OutT>(finish(a)); }

  Col make_col(int64_t n, int64_t) const { return {std::vector<Acc>(static_cast<size_t>(n), 0)}; }
  void row(Col& c, const T* x, int64_t n, int64_t) const {
    Acc* a = c.a.data();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) a[i] += map(x[i]);
  }
  void merge_col(Col& c, const Col& d, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) c.a[i] += d.a[i];
  }
  void store_col(int64_t o0, const Col& c, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) out[o0 + i] = static_cast<OutT>(finish(c.a[i]));
  }
};

template <typename T, typename Acc, typename OutT, typename Map, typename Finish>
SumReducer<T, Acc, OutT, Map, Finish> sum_reducer(OutT* out, Map map, Finish finish) {
  return {out, map, finish};
}

template <typename T, typename Acc, typename OutT>
struct ProdReducer {
  OutT* out;
  using acc_t = Acc;
  struct Col {
    std::vector<Acc> a;
  };

  Acc init(int64_t) const { return 1; }
  void run(Acc& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    if (s == 1) {
      acc *= lane_prod<Acc>(p, n);
    } else {
      for (int64_t i = 0; i < n; ++i) acc *= static_cast<Acc>(p[i * s]);
    }
  }
  void merge(Acc& a, const Acc& b) const { a *= b; }
  void store(int64_t o, Acc a) const { out[o] = static_cast<OutT>(a); }
  Col make_col(int64_t n, int64_t) const { return {std::vector<Acc>(static_cast<size_t>(n), 1)}; }
  void row(Col& c, const T* x, int64_t n, int64_t) const {
    Acc* a = c.a.data();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) a[i] *= static_cast<Acc>(x[i]);
  }
  void merge_col(Col& c, const Col& d, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) c.a[i] *= d.a[i];
  }
  void store_col(int64_t o0, const Col& c, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) out[o0 + i] = static_cast<OutT>(c.a[i]);
  }
};

// Max/min of map(x) (map = |x| for the inf-norm), NaN-propagating.
template <bool IsMax, typename T, typename Map>
struct ExtremeReducer {
  T* out;
  Map map;
  T start;  // the extreme of nothing: the worst value, or 0 for the max of |x|
  using acc_t = T;
  struct Col {
    std::vector<T> m;
  };

  T init(int64_t) const { return start; }
  void run(T& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    T m = acc;
    if (s == 1) {
      m = lane_extreme<IsMax>(p, n, m, map);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const T x = map(p[i * s]);
        m = better<IsMax>(x, m) ? x : m;
      }
    }
    acc = m;
  }
  void merge(T& a, const T& b) const {
    if (better<IsMax>(b, a)) a = b;
  }
  void store(int64_t o, T a) const { out[o] = a; }
  Col make_col(int64_t n, int64_t) const { return {std::vector<T>(static_cast<size_t>(n), start)}; }
  void row(Col& c, const T* x, int64_t n, int64_t) const {
    T* m = c.m.data();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T v = map(x[i]);
      m[i] = better<IsMax>(v, m[i]) ? v : m[i];
    }
  }
  void merge_col(Col& c, const Col& d, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) merge(c.m[i], d.m[i]);
  }
  void store_col(int64_t o0, const Col& c, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) out[o0 + i] = c.m[i];
  }
};

// Extreme value and the flat reduced index of its first occurrence.
template <bool IsMax, typename T>
struct ArgReducer {
  T* values;  // may be null
  int64_t* indices;
  struct acc_t {
    T v;
    int64_t i;
  };
  struct Col {
    std::vector<T> v;
    std::vector<int64_t> i;
  };

  acc_t init(int64_t r0) const { return {worst_value<IsMax, T>(), r0}; }
  void run(acc_t& acc, const T* p, int64_t n, int64_t s, int64_t r) const {
    if (s == 1) {
      // One vectorised pass for the value, then a short scan for where it first occurs.
      const T m = lane_extreme<IsMax>(p, n, worst_value<IsMax, T>(), [](T x) { return x; });
      if (!better<IsMax>(m, acc.v)) return;
      int64_t i = 0;
      if (is_nan(m)) {
        while (!is_nan(p[i])) ++i;
      } else {
        while (p[i] != m) ++i;
      }
      acc = {m, r + i};
    } else {
      for (int64_t i = 0; i < n; ++i)
        if (better<IsMax>(p[i * s], acc.v)) acc = {p[i * s], r + i};
    }
  }
  void merge(acc_t& a, const acc_t& b) const {
    if (better<IsMax>(b.v, a.v)) a = b;
  }
  void store(int64_t o, const acc_t& a) const {
    if (values) values[o] = a.v;
    indices[o] = a.i;
  }
  Col make_col(int64_t n, int64_t r0) const {
    return {std::vector<T>(static_cast<size_t>(n), worst_value<IsMax, T>()),
            std::vector<int64_t>(static_cast<size_t>(n), r0)};
  }
  void row(Col& c, const T* x, int64_t n, int64_t r) const {
    T* v = c.v.data();
    int64_t* id = c.i.data();
    for (int64_t k = 0; k < n; ++k) {
      const bool b = better<IsMax>(x[k], v[k]);
      v[k] = b ? x[k] : v[k];
      id[k] = b ? r : id[k];
    }
  }
  void merge_col(Col& c, const Col& d, int64_t n) const {
    for (int64_t k = 0; k < n; ++k)
      if (better<IsMax>(d.v[k], c.v[k])) {
        c.v[k] = d.v[k];
        c.i[k] = d.i[k];
      }
  }
  void store_col(int64_t o0, const Col& c, int64_t n) const {
    for (int64_t k = 0; k < n; ++k) {
      if (values) values[o0 + k] = c.v[k];
      indices[o0 + k] = c.i[k];
    }
  }
};

// Count, mean and sum of squared deviations, merged with Chan's formula. Runs are processed in
// cache-sized blocks with two passes each (mean, then deviations), which is as accurate as a
// two-pass variance and reads memory once.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  void merge(const Moments& b) {
    if (b.n == 0) return;
    if (n == 0) {
      *this = b;
      return;
    }
    const double tot = n + b.n, d = b.mean - mean;
    mean += d * (b.n / tot);
    m2 += b.m2 + d * d * (n * b.n / tot);
    n = tot;
  }
};

template <typename T>
struct VarReducer {
  T* out;
  double correction;
  bool take_sqrt;
  using acc_t = Moments;
  struct Col {
    double n = 0;
    std::vector<double> mean, m2;
  };
  static constexpr int64_t kBlock = 4096;

  Moments init(int64_t) const { return {}; }
  void run(Moments& acc, const T* p, int64_t n, int64_t s, int64_t) const {
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t len = std::min(kBlock, n - b);
      const T* q = p + b * s;
      Moments m;
      m.n = static_cast<double>(len);
      if (s == 1) {
        m.mean = lane_sum<double>(q, len, [](T x) { return static_cast<double>(x); }) / m.n;
        const double mu = m.mean;
        m.m2 = lane_sum<double>(q, len, [mu](T x) {
          const double d = static_cast<double>(x) - mu;
          return d * d;
        });
      } else {
        double t = 0;
        for (int64_t i = 0; i < len; ++i) t += static_cast<double>(q[i * s]);
        m.mean = t / m.n;
        for (int64_t i = 0; i < len; ++i) {
          const double d = static_cast<double>(q[i * s]) - m.mean;
          m.m2 += d * d;
        }
      }
      acc.merge(m);
    }
  }
  void merge(Moments& a, const Moments& b) const { a.merge(b); }
  T finish(double n, double m2) const {
    const double v = m2 / std::max(0.0, n - correction);
    return static_cast<T>(take_sqrt ? std::sqrt(v) : v);
  }
  void store(int64_t o, const Moments& a) const { out[o] = finish(a.n, a.m2); }
  Col make_col(int64_t n, int64_t) const {
    return {0, std::vector<double>(static_cast<size_t>(n), 0), std::vector<double>(static_cast<size_t>(n), 0)};
  }
  // Welford across rows: every column of a row shares the count, so 1/n is one division per row.
  void row(Col& c, const T* x, int64_t n, int64_t) const {
    c.n += 1;
    const double inv = 1.0 / c.n;
    double* mean = c.mean.data();
    double* m2 = c.m2.data();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x[i]);
      const double d = v - mean[i];
      mean[i] += d * inv;
      m2[i] += d * (v - mean[i]);
    }
  }
  void merge_col(Col& c, const Col& d, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) {
      Moments a{c.n, c.mean[i], c.m2[i]};
      a.merge({d.n, d.mean[i], d.m2[i]});
      c.mean[i] = a.mean;
      c.m2[i] = a.m2;
    }
    c.n += d.n;
  }
  void store_col(int64_t o0, const Col& c, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) out[o0 + i] = finish(c.n, c.m2[i]);
  }
};

// ------------------------------------------------------------------ kernels

template <typename T>
void reduce_floating(ReduceOp op, const Tensor& out, const T* base, const Layout& L, double p) {
  T* y = out.data_ptr<T>();
  auto ident = [](T x) { return static_cast<double>(x); };
  switch (op) {
    case ReduceOp::Sum:
      run_reduce(sum_reducer<T, double>(y, ident, [](double a) { return a; }), base, L);
      break;
    case ReduceOp::Mean: {
      const double scale = 1.0 / static_cast<double>(L.R);
      run_reduce(sum_reducer<T, double>(y, ident, [scale](double a) { return a * scale; }), base, L);
      break;
    }
    case ReduceOp::Norm:
      if (p == 2.0) {
        run_reduce(sum_reducer<T, double>(
                       y, [](T x) { return static_cast<double>(x) * static_cast<double>(x); },
                       [](double a) { return std::sqrt(a); }),
                   base, L);
      } else if (p == 1.0) {
        run_reduce(sum_reducer<T, double>(
                       y, [](T x) { return static_cast<double>(std::abs(x)); }, [](double a) { return a; }),
                   base, L);
      } else if (std::isinf(p)) {
        auto absf = [](T x) { return std::abs(x); };
        run_reduce(ExtremeReducer<true, T, decltype(absf)>{y, absf, T(0)}, base, L);
      } else if (p == 3.0) {
        run_reduce(sum_reducer<T, double>(
                       y,
                       [](T x) {
                         const double a = std::abs(static_cast<double>(x));
                         return a * a * a;
                       },
                       [](double a) { return std::cbrt(a); }),
                   base, L);
      } else {
        // A general power is a libm call per element: correct but far from memory speed.
        run_reduce(sum_reducer<T, double>(
                       y, [p](T x) { return std::pow(std::abs(static_cast<double>(x)), p); },
                       [p](double a) { return std::pow(a, 1.0 / p); }),
                   base, L);
      }
      break;
    case ReduceOp::Var:
    case ReduceOp::Std:
      run_reduce(VarReducer<T>{y, p, op == ReduceOp::Std}, base, L);
      break;
    default:
      EMBER_FAIL(reduce_op_name(op), ": internal error: not a floating-only reduction");
  }
}

void cpu_reduce(ReduceOp op, const Tensor& out, const Tensor& in, int64_t nred, double p) {
  const Layout L = make_layout(in, nred);
  EMBER_DISPATCH_NUMERIC(in.dtype(), reduce_op_name(op), [&] {
    using T = scalar_t;
    const T* base = static_cast<const T*>(in.raw_data());
    auto ident = [](T x) { return x; };
    switch (op) {
      case ReduceOp::Sum:
        if constexpr (std::is_floating_point_v<T>) {
          reduce_floating<T>(op, out, base, L, p);
        } else {
          run_reduce(
              sum_reducer<T, int64_t>(
                  out.data_ptr<int64_t>(), [](T x) { return static_cast<int64_t>(x); }, [](int64_t a) { return a; }),
              base, L);
        }
        break;
      case ReduceOp::Prod:
        if constexpr (std::is_floating_point_v<T>) {
          run_reduce(ProdReducer<T, double, T>{out.data_ptr<T>()}, base, L);
        } else {
          // Unsigned arithmetic wraps like PyTorch's int64 product without signed overflow.
          run_reduce(ProdReducer<T, uint64_t, int64_t>{out.data_ptr<int64_t>()}, base, L);
        }
        break;
      case ReduceOp::Max:
        run_reduce(ExtremeReducer<true, T, decltype(ident)>{out.data_ptr<T>(), ident, worst_value<true, T>()}, base, L);
        break;
      case ReduceOp::Min:
        run_reduce(ExtremeReducer<false, T, decltype(ident)>{out.data_ptr<T>(), ident, worst_value<false, T>()}, base,
                   L);
        break;
      default:
        if constexpr (std::is_floating_point_v<T>) {
          reduce_floating<T>(op, out, base, L, p);
        } else {
          EMBER_FAIL(reduce_op_name(op), ": expected a floating-point tensor, got ", dtype_name(in.dtype()));
        }
    }
  });
}

void cpu_arg_reduce(ArgReduceOp op, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t nred) {
  const Layout L = make_layout(in, nred);
  EMBER_DISPATCH_NUMERIC(in.dtype(), op == ArgReduceOp::Max ? "argmax" : "argmin", [&] {
    using T = scalar_t;
    const T* base = static_cast<const T*>(in.raw_data());
    T* v = values.defined() ? values.data_ptr<T>() : nullptr;
    int64_t* idx = indices.data_ptr<int64_t>();
    if (op == ArgReduceOp::Max)
      run_reduce(ArgReducer<true, T>{v, idx}, base, L);
    else
      run_reduce(ArgReducer<false, T>{v, idx}, base, L);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(reduce_stub, CPU, cpu_reduce);
EMBER_REGISTER_KERNEL(arg_reduce_stub, CPU, cpu_arg_reduce);

}  // namespace ember
