// The dispatch stubs of core's kernels (core/dispatch.h), defined once here: the CPU kernels that
// fill them are compiled once per CPU capability level (core/cpu/), the CUDA kernels once per
// build (core/cuda/), and each copy registers itself into these.
#include "core/copy.h"
#include "core/elementwise_kernels.h"
#include "core/gemm_kernels.h"
#include "core/index_kernels.h"
#include "core/nn_kernels.h"
#include "core/random.h"
#include "core/reduce_kernels.h"
#include "core/rnn_kernels.h"

namespace ember {

EMBER_DEFINE_STUB(activation_stub, ActivationFn);
EMBER_DEFINE_STUB(activation_grad_stub, ActivationGradFn);
EMBER_DEFINE_STUB(conv2d_forward_stub, ConvForwardFn);
EMBER_DEFINE_STUB(conv2d_backward_input_stub, ConvBackwardInputFn);
EMBER_DEFINE_STUB(conv2d_backward_weight_stub, ConvBackwardWeightFn);
EMBER_DEFINE_STUB(copy_stub, CopyFn);
EMBER_DEFINE_STUB(fill_stub, FillFn);
EMBER_DEFINE_STUB(cross_entropy_forward_stub, CrossEntropyForwardFn);
EMBER_DEFINE_STUB(cross_entropy_backward_stub, CrossEntropyBackwardFn);
EMBER_DEFINE_STUB(dropout_apply_stub, DropoutApplyFn);
EMBER_DEFINE_STUB(binary_stub, BinaryFn);
EMBER_DEFINE_STUB(binary_grad_stub, BinaryGradFn);
EMBER_DEFINE_STUB(compare_stub, CompareFn);
EMBER_DEFINE_STUB(logical_stub, LogicalFn);
EMBER_DEFINE_STUB(where_stub, WhereFn);
EMBER_DEFINE_STUB(isclose_stub, IsCloseFn);
EMBER_DEFINE_STUB(gemm_stub, GemmFn);
EMBER_DEFINE_STUB(gemm_batched_stub, GemmBatchedFn);
EMBER_DEFINE_STUB(dot_stub, DotFn);
EMBER_DEFINE_STUB(index_range_stub, IndexRangeFn);
EMBER_DEFINE_STUB(index_select_stub, IndexSelectFn);
EMBER_DEFINE_STUB(index_add_stub, IndexAddFn);
EMBER_DEFINE_STUB(gather_stub, GatherFn);
EMBER_DEFINE_STUB(scatter_stub, ScatterFn);
EMBER_DEFINE_STUB(masked_fill_stub, MaskedFillFn);
EMBER_DEFINE_STUB(one_hot_stub, OneHotFn);
EMBER_DEFINE_STUB(trilu_stub, TriluFn);
EMBER_DEFINE_STUB(batch_norm_forward_stub, BatchNormForwardFn);
EMBER_DEFINE_STUB(batch_norm_backward_stub, BatchNormBackwardFn);
EMBER_DEFINE_STUB(layer_norm_forward_stub, LayerNormForwardFn);
EMBER_DEFINE_STUB(layer_norm_backward_stub, LayerNormBackwardFn);
EMBER_DEFINE_STUB(max_pool2d_forward_stub, MaxPoolForwardFn);
EMBER_DEFINE_STUB(max_pool2d_backward_stub, MaxPoolBackwardFn);
EMBER_DEFINE_STUB(avg_pool2d_forward_stub, AvgPoolForwardFn);
EMBER_DEFINE_STUB(avg_pool2d_backward_stub, AvgPoolBackwardFn);
EMBER_DEFINE_STUB(adaptive_avg_pool2d_forward_stub, AdaptiveAvgPoolForwardFn);
EMBER_DEFINE_STUB(adaptive_avg_pool2d_backward_stub, AdaptiveAvgPoolBackwardFn);
EMBER_DEFINE_STUB(random_stub, RandomFn);
EMBER_DEFINE_STUB(reduce_grad_stub, ReduceGradFn);
EMBER_DEFINE_STUB(index_grad_stub, IndexGradFn);
EMBER_DEFINE_STUB(prod_grad_stub, ProdGradFn);
EMBER_DEFINE_STUB(reduce_stub, ReduceFn);
EMBER_DEFINE_STUB(arg_reduce_stub, ArgReduceFn);
EMBER_DEFINE_STUB(rnn_forward_stub, RnnForwardFn);
EMBER_DEFINE_STUB(rnn_backward_stub, RnnBackwardFn);
EMBER_DEFINE_STUB(softmax_stub, SoftmaxFn);
EMBER_DEFINE_STUB(softmax_grad_stub, SoftmaxGradFn);
EMBER_DEFINE_STUB(logsumexp_stub, LogSumExpFn);
EMBER_DEFINE_STUB(sort_stub, SortFn);
EMBER_DEFINE_STUB(unary_stub, UnaryFn);
EMBER_DEFINE_STUB(unary_grad_stub, UnaryGradFn);

}  // namespace ember
