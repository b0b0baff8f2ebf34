// The one header a program using Ember includes: tensors and every op, autograd (NoGradGuard,
// gradcheck), devices, generators, threads, memory statistics and streams; the training API
// (nn modules, layers, losses, initialisers, optimizers, LR schedules, checkpoints). Data loading
// (data/: datasets, the DataLoader, transforms; Ember::ember_data), the model zoo, interop and the
// scheduler are built but not in this header: include their own headers (e.g. "data/dataloader.h")
// and link their libraries.
#pragma once

#include <ember/config.h>

#include "core/allocator.h"
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"
