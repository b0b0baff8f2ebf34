#include "core/parallel.h"
#include "core/reduce_kernels.h"

namespace ember {

EMBER_DEFINE_STUB(reduce_stub, ReduceFn);

namespace {

template <typename T>
using acc_type = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

void cpu_reduce(ReduceOp op, const Tensor& out, const Tensor& in) {
  const int64_t outer = in.size(0), inner = in.size(1);
  EMBER_DISPATCH_NUMERIC(in.dtype(), "sum", [&] {
    using T = scalar_t;
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    switch (op) {
      case ReduceOp::Sum:
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t o = b; o < e; ++o) {
                         acc_type<T> acc = 0;
                         const T* row = x + o * inner;
                         for (int64_t i = 0; i < inner; ++i) acc += row[i];
                         y[o] = static_cast<T>(acc);
                       }
                     });
        break;
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(reduce_stub, CPU, cpu_reduce);

}  // namespace ember
