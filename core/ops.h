// Every tensor op, one entry point each. Each checks shapes, dtypes and devices once with a
// message that names the op and what was expected, then calls the kernel registered for the
// operands' device (core/dispatch.h) and records autograd history when needed.
#pragma once

#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/ops/linalg.h"
#include "core/ops/nn.h"
#include "core/ops/reduce.h"
#include "core/ops/rnn.h"
#include "core/tensor.h"
