// Checkpoints: a module's parameters and buffers, optimizers' state, LR schedules' state,
// generator states, the training position and free-form metadata in one file (format: proto/checkpoint.proto — a
// Protobuf header followed by raw 64-byte-aligned tensor data, so tensors beyond Protobuf's 2 GB
// message limit work). Files are written atomically (temporary file, fsync, rename). Reading
// checks the magic, version, sizes and a CRC32 per tensor; loading into a module or optimizer
// checks names, shapes and dtypes and reports every mismatch in one ember::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "layers/module.h"
#include "layers/optim/grad_scaler.h"
#include "layers/optim/lr_scheduler.h"
#include "layers/optim/optimizer.h"

namespace ember {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct TrainingPosition {
  int64_t epoch = 0;
  int64_t step = 0;          // optimizer steps taken so far
  int64_t loader_epoch = 0;  // the data loader's position (data::LoaderPosition)
  int64_t loader_batch = 0;
  int32_t world_size = 1;
  int32_t rank = 0;
};

// An LR schedule's state as stored: its kind and its state_dict().
struct ScheduleState {
  std::string kind;  // "LRScheduler" or "ReduceLROnPlateau"
  std::map<std::string, double> state;
};

// Everything a checkpoint file holds, in memory.
struct CheckpointContents {
  nn::StateDict model_parameters;
  nn::StateDict model_buffers;
  std::vector<optim::OptimizerState> optimizers;
  std::vector<std::pair<std::string, GeneratorState>> generators;
  std::vector<ScheduleState> schedulers;
  TrainingPosition position;
  std::map<std::string, std::string> metadata;
  nn::NamedTensors extra_tensors;
  std::optional<optim::GradScalerState> grad_scaler;  // fp16 loss scaling, when the run had it
  std::string precision;                              // "fp32", "bf16", "fp16"; empty: not recorded

  // The model's parameters then its buffers, as Module::load_state_dict takes them: the one place
  // the two lists are joined (loading a checkpoint, a pipeline's stages, the tools' networks).
  nn::StateDict model_state() const;
};

void write_checkpoint(const std::string& path, const CheckpointContents& contents);
CheckpointContents read_checkpoint(const std::string& path);

// A model alone; `metadata` says what it is (the model, its classes, its input normalisation:
// what `ember eval` and `ember predict` read).
void save(const nn::Module& module, const std::string& path, const std::map<std::string, std::string>& metadata = {});
// Loads parameters and buffers into `module` (strict: every name must match both ways).
void load(nn::Module& module, const std::string& path, bool strict = true);
// An optimizer alone.
void save(const optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

// An LR schedule in a training state: any optim::LRScheduler, or a ReduceLROnPlateau (which
// steps on a metric and is not one), converted implicitly from a pointer.
class ScheduleRef {
 public:
  ScheduleRef(optim::LRScheduler* s);        // NOLINT(google-explicit-constructor): {&sched} in a list
  ScheduleRef(optim::ReduceLROnPlateau* s);  // NOLINT(google-explicit-constructor)
  const std::string& kind() const { return kind_; }
  std::map<std::string, double> state_dict() const { return save_(); }
  void load_state_dict(const std::map<std::string, double>& s) const { load_(s); }

 private:
  std::string kind_;
  std::function<std::map<std::string, double>()> save_;
  std::function<void(const std::map<std::string, double>&)> load_;
};

// A whole training state: what `resume` needs to continue bit for bit.
struct TrainingState {
  nn::Module* model = nullptr;
  std::vector<optim::Optimizer*> optimizers;
  std::vector<std::pair<std::string, Generator*>> generators;  // e.g. {"default", &default_generator()}
  std::vector<ScheduleRef> schedulers;                         // restored in this order
  optim::GradScaler* grad_scaler = nullptr;                    // fp16 loss scaling, if any
  // The training precision ("fp32", "bf16", "fp16"): recorded; on load a file that says another
  // one is refused (a file that says none was fp32). Empty: neither recorded nor checked.
  std::string precision;
};
void save_training(const std::string& path, const TrainingState& state, const TrainingPosition& position,
                   const std::map<std::string, std::string>& metadata = {});
// Restores model, optimizers, schedules and generators (each named generator must be in the
// file; the schedules must match the file's in number and kind) and returns the position and the
// metadata. Checks everything before changing anything: on an error, all is as it was. A loss
// scaler's state is restored when the file has one (a file without, older or from a run without
// scaling, leaves the program's scaler as it is); a file with one refuses a program without.
std::pair<TrainingPosition, std::map<std::string, std::string>> load_training(const std::string& path,
                                                                              const TrainingState& state);

namespace checkpoint_detail {
// Tensor data is written, read and checksummed in pieces of at most this many bytes (1 GiB by
// default; at most 1 GiB), so that tensors beyond 2 GB never reach a call limited to 32-bit
// sizes. Tests set a few bytes to run the piecewise path on small tensors. Not thread-safe.
void set_io_chunk_bytes(uint64_t bytes);
uint64_t io_chunk_bytes();
}  // namespace checkpoint_detail

}  // namespace ember
