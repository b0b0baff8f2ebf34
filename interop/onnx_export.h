// ONNX export: a trained Ember model as a standard .onnx file (opset 17, IR version 8) that
// onnxruntime, TensorRT or a browser runtime can serve. The export traces the model layer by layer
// on an example input (interop/onnx_layers.h) and checks that the layers, run one after another,
// give what the model's own forward gives; the batch dimension is left free ("batch"), and so is the
// time dimension of token inputs [B, T] ("sequence").
//
// Exported: any nn::Sequential of the layers named in onnx_layers.h (so MnistCnn, LeNet5, the GAN
// generators and discriminators), LstmLanguageModel (tokens [B, T] -> logits [B, T, V]) and
// BiLstmClassifier (tokens [B, T] and lengths [B], both int64 -> logits [B, classes]). Floating-point
// parameters must be float32. Anything else is an ember::Error that names the module.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/module.h"
#include "onnx_model.pb.h"

namespace ember::onnx {

struct ExportOptions {
  int64_t opset = 17;                                // 17 to 21: every operator written means the same in all of them
  bool dynamic_batch = true;                         // false: every dimension fixed to the example's
  std::map<std::string, std::string> metadata = {};  // the model's metadata_props
};

// The model as an ONNX ModelProto. `example_inputs` are the model's inputs (one tensor, or tokens
// and lengths for a BiLstmClassifier) on the module's device; the module runs in evaluation mode
// without gradients and is left in the mode it was in.
onnx_schema::ModelProto to_onnx(nn::Module& module, const std::vector<Tensor>& example_inputs,
                                const ExportOptions& options = {});

// Writes to_onnx(...) to `path` through the atomic writer (core/atomic_file.h).
void export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {});
inline void export_model(nn::Module& module, const Tensor& example_input, const std::string& path,
                         const ExportOptions& options = {}) {
  export_model(module, std::vector<Tensor>{example_input}, path, options);
}

}  // namespace ember::onnx
