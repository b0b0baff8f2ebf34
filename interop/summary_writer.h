// ember::SummaryWriter: training curves, images, histograms and text for TensorBoard, in the style
// of torch.utils.tensorboard.SummaryWriter, written without TensorFlow: Event messages
// (proto/tensorboard_event.proto) framed as TFRecords (interop/tfrecord.h) in
// `log_dir/events.out.tfevents.<time>.<host>.<pid>.<n>`, a new file per writer that never replaces
// one already there.
//
// The add_* calls check their arguments, copy what they need and queue: a background thread builds
// the histograms and PNGs, appends to the file and flushes it every flush_secs, so a training step
// waits neither for the disk nor for the encoding. A write that fails there is reported as an
// ember::Error by the next add_*, flush() or close(), never dropped silently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/tensor.h"

namespace ember {

struct SummaryWriterOptions {
  double flush_secs = 10;            // queued events reach the file at least this often
  std::string filename_suffix = {};  // appended to the event file's name
};

class SummaryWriter {
 public:
  // Creates log_dir (and its parents) if needed; an ember::Error if it cannot.
  explicit SummaryWriter(const std::string& log_dir, SummaryWriterOptions options = {});
  ~SummaryWriter();  // close(), reporting a failure on stderr (a destructor cannot throw)
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // wall_time: seconds since the epoch; now when left out.
  void add_scalar(const std::string& tag, double value, int64_t step, std::optional<double> wall_time = {});
  // Several curves on one chart, as PyTorch does it: each name's values go to its own run,
  // log_dir/<main_tag>_<name>, under the tag main_tag.
  void add_scalars(const std::string& main_tag, const std::map<std::string, double>& values, int64_t step,
                   std::optional<double> wall_time = {});
  // float [C, H, W] (C = 1, 3 or 4) with values in [0, 1] (clamped), or uint8 [H, W, C] or [H, W].
  void add_image(const std::string& tag, const Tensor& image, int64_t step, std::optional<double> wall_time = {});
  // The distribution of `values` (any shape and floating or integer dtype), in TensorFlow's default
  // buckets (edges ±1e-12 · 1.1^k and 0). Non-finite values are left out; when none is finite (a
  // diverged run) the histogram is not written and stderr says so.
  void add_histogram(const std::string& tag, const Tensor& values, int64_t step, std::optional<double> wall_time = {});
  // Markdown text, shown by TensorBoard's text dashboard.
  void add_text(const std::string& tag, const std::string& text, int64_t step, std::optional<double> wall_time = {});

  // Everything added so far is in the file (written and flushed to the operating system).
  void flush();
  // flush(), then stop the thread and close the file; further add_* calls are errors.
  void close();

  const std::string& log_dir() const { return log_dir_; }
  const std::string& file() const { return file_; }

 private:
  // Queues an event to be serialised by `make` on the background thread (an empty string: none).
  void enqueue(std::function<std::string()> make);
  void run();              // the background thread
  void stop_thread();      // asks it to write what is queued and end, and joins it
  void throw_if_failed();  // under mutex_
  SummaryWriter& child(const std::string& name);

  std::string log_dir_, file_;
  SummaryWriterOptions options_;
  std::FILE* out_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<std::string()>> queue_;
  uint64_t queued_ = 0, written_ = 0;  // records ever queued / written and flushed
  bool flush_asked_ = false, stopping_ = false, closed_ = false;
  std::string failure_;
  std::thread thread_;
  std::map<std::string, std::unique_ptr<SummaryWriter>> children_;  // add_scalars' runs
};

}  // namespace ember
