#include "interop/summary_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "data/image.h"
#include "interop/tfrecord.h"
#include "tensorboard_event.pb.h"

namespace ember {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

tensorboard::Event event_at(int64_t step, std::optional<double> wall_time) {
  tensorboard::Event e;
  e.set_wall_time(wall_time ? *wall_time : now_seconds());
  e.set_step(step);
  return e;
}

// TensorFlow's default histogram edges: 0 and ±1e-12 · 1.1^k up to 1e20, ascending.
const std::vector<double>& default_edges() {
  static const std::vector<double> edges = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    std::vector<double> e;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) e.push_back(-*it);
    e.push_back(0);
    e.insert(e.end(), pos.begin(), pos.end());
    e.push_back(std::numeric_limits<double>::max());
    return e;
  }();
  return edges;
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& log_dir, SummaryWriterOptions options)
    : log_dir_(log_dir), options_(std::move(options)) {
  namespace fs = std::filesystem;
  EMBER_CHECK(!log_dir.empty(), "SummaryWriter: the log folder is empty");
  EMBER_CHECK(options_.flush_secs > 0, "SummaryWriter: flush_secs must be positive, got ", options_.flush_secs);
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  EMBER_CHECK(fs::is_directory(log_dir), "SummaryWriter: cannot create the log folder '", log_dir, "'",
              ec ? " (" + ec.message() + ")" : std::string(" (a file of that name is in the way)"));
  // The time, host and process make the name TensorBoard sorts by; the counter keeps two writers of
  // one process apart. "x": a file that is there already is never replaced.
  static std::atomic<int> counter{0};
  const std::string base =
      (fs::path(log_dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now_seconds())) + "." +
                            host_name() + "." + std::to_string(::getpid()) + "."))
          .string();
  for (int tries = 0; !out_; ++tries) {
    file_ = base + std::to_string(counter++) + options_.filename_suffix;
    out_ = std::fopen(file_.c_str(), "wbx");
    EMBER_CHECK(out_ || (errno == EEXIST && tries < 1000), "SummaryWriter: cannot create '", file_, "' (",
                std::strerror(errno), ")");
  }
  tensorboard::Event version = event_at(0, {});
  version.set_file_version("brain.Event:2");
  enqueue([s = version.SerializeAsString()] { return s; });
  thread_ = std::thread([this] { run(); });
  try {
    flush();  // the file is a valid event file from the start
  } catch (...) {
    stop_thread();  // a failed constructor runs no destructor: the thread must not outlive it
    std::fclose(out_);
    throw;
  }
}

void SummaryWriter::stop_thread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::cerr << "SummaryWriter: " << e.what() << "\n";
  }
}

void SummaryWriter::throw_if_failed() {
  EMBER_CHECK(failure_.empty(), "SummaryWriter: writing '", file_, "' failed (", failure_, ")");
  EMBER_CHECK(!closed_, "SummaryWriter: '", file_, "' is closed");
}

void SummaryWriter::enqueue(std::function<std::string()> make) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  queue_.push_back(std::move(make));
  ++queued_;
  wake_.notify_one();
}

void SummaryWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto last_flush = std::chrono::steady_clock::now();
  const auto period = std::chrono::duration<double>(options_.flush_secs);
  while (true) {
    wake_.wait_until(lock, last_flush + std::chrono::duration_cast<std::chrono::steady_clock::duration>(period),
                     [&] { return stopping_ || flush_asked_ || !queue_.empty(); });
    std::deque<std::function<std::string()>> batch;
    batch.swap(queue_);
    const bool flush_now = flush_asked_ || stopping_ || std::chrono::steady_clock::now() - last_flush >= period;
    const uint64_t target = queued_;
    lock.unlock();
    std::string error;
    for (const auto& make : batch) {
      if (!error.empty()) break;
      std::string rec;
      try {
        rec = make();
      } catch (const std::exception& e) {  // an encoder's failure (out of memory, say)
        error = e.what();
        break;
      }
      if (rec.empty()) continue;
      rec = tfrecord::frame(rec);
      errno = 0;
      if (std::fwrite(rec.data(), 1, rec.size(), out_) != rec.size())
        error = errno ? std::strerror(errno) : "short write";
    }
    if (error.empty() && flush_now && std::fflush(out_) != 0) error = std::strerror(errno);
    lock.lock();
    if (!error.empty() && failure_.empty()) failure_ = error;
    if (flush_now) {
      last_flush = std::chrono::steady_clock::now();
      written_ = target;
      flush_asked_ = false;
      done_.notify_all();
    }
    if (stopping_ && queue_.empty()) return;
  }
}

void SummaryWriter::flush() {
  for (auto& [name, c] : children_) c->flush();
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  const uint64_t target = queued_;
  flush_asked_ = true;
  wake_.notify_one();
  done_.wait(lock, [&] { return written_ >= target || !failure_.empty(); });
  throw_if_failed();
}

void SummaryWriter::close() {
  for (auto& [name, c] : children_) c->close();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
  }
  stop_thread();
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    failure = failure_;
  }
  const bool closed_ok = std::fclose(out_) == 0;
  out_ = nullptr;
  EMBER_CHECK(failure.empty() && closed_ok, "SummaryWriter: writing '", file_, "' failed (",
              failure.empty() ? std::string(std::strerror(errno)) : failure, ")");
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step, std::optional<double> wall_time) {
  tensorboard::Event e = event_at(step, wall_time);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  enqueue([s = e.SerializeAsString()] { return s; });
}

SummaryWriter& SummaryWriter::child(const std::string& name) {
  auto& c = children_[name];
  if (!c) c = std::make_unique<SummaryWriter>((std::filesystem::path(log_dir_) / name).string(), options_);
  return *c;
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::map<std::string, double>& values, int64_t step,
                                std::optional<double> wall_time) {
  const double t = wall_time ? *wall_time : now_seconds();
  for (const auto& [name, value] : values) {
    std::string run = main_tag + "_" + name;
    std::replace(run.begin(), run.end(), '/', '_');
    child(run).add_scalar(main_tag, value, step, t);
  }
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& image, int64_t step,
                              std::optional<double> wall_time) {
  Tensor hwc;
  if (image.dtype() == DType::UInt8) {
    hwc = image;
  } else {
    EMBER_CHECK(is_floating(image.dtype()) && image.dim() == 3 &&
                    (image.size(0) == 1 || image.size(0) == 3 || image.size(0) == 4),
                "add_image('", tag, "'): expected float [C, H, W] with C = 1, 3 or 4, or uint8 [H, W, C], got ",
                dtype_name(image.dtype()), " ", shape_str(image.shape()));
    // [0, 1] -> [0, 255], rounded and clamped; NaN as 0.
    const Tensor chw = image.detach().cpu().to(DType::Float32).contiguous();
    const int64_t c = chw.size(0), h = chw.size(1), w = chw.size(2);
    hwc = empty({h, w, c}, {DType::UInt8, Device::cpu()});
    const float* src = chw.data_ptr<float>();
    uint8_t* dst = hwc.data_ptr<uint8_t>();
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < h * w; ++i) {
        const float v = src[k * h * w + i] * 255.0f;
        dst[i * c + k] = static_cast<uint8_t>(std::isnan(v) ? 0.0f : std::lround(std::clamp(v, 0.0f, 255.0f)));
      }
  }
  EMBER_CHECK((hwc.dim() == 2 || (hwc.dim() == 3 && (hwc.size(2) == 1 || hwc.size(2) == 3 || hwc.size(2) == 4))) &&
                  hwc.numel() > 0 && hwc.size(0) < (1 << 24) && hwc.size(1) < (1 << 24),
              "add_image('", tag, "'): expected a non-empty uint8 [H, W] or [H, W, C] with C = 1, 3 or 4, got ",
              shape_str(hwc.shape()));
  const Tensor pixels = hwc.detach().cpu().contiguous().clone();  // the caller may change hwc next
  enqueue([tag, pixels, e = event_at(step, wall_time)]() mutable {
    const std::string png = data::encode_png(pixels, "add_image('" + tag + "')");
    auto* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    auto* img = v->mutable_image();
    img->set_height(static_cast<int32_t>(pixels.size(0)));
    img->set_width(static_cast<int32_t>(pixels.size(1)));
    img->set_colorspace(static_cast<int32_t>(pixels.dim() == 3 ? pixels.size(2) : 1));
    img->set_encoded_image_string(png);
    return e.SerializeAsString();
  });
}

namespace {
// The histogram event of `x` (float64, contiguous); empty when no value is finite.
std::string histogram_event(const std::string& tag, const Tensor& x, tensorboard::Event e) {
  const double* p = x.data_ptr<double>();
  const std::vector<double>& edges = default_edges();
  std::vector<double> counts(edges.size(), 0);
  double lo = INFINITY, hi = -INFINITY, n = 0, sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = p[i];
    if (!std::isfinite(v)) continue;
    // Bucket i holds (edges[i-1], edges[i]].
    counts[std::lower_bound(edges.begin(), edges.end(), v) - edges.begin()] += 1;
    lo = std::min(lo, v), hi = std::max(hi, v);
    n += 1, sum += v, sum_sq += v * v;
  }
  if (n == 0) {
    std::cerr << "SummaryWriter: histogram '" << tag << "' at step " << e.step() << ": none of its " << x.numel()
              << " values is finite; not written\n";
    return {};
  }
  // Only the buckets from the first non-empty one to the last, with an empty one before it, as
  // TensorBoard's own writers send them.
  size_t first = 0, last = counts.size() - 1;
  while (counts[first] == 0) ++first;
  while (counts[last] == 0) --last;
  if (first > 0) --first;
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  auto* h = v->mutable_histo();
  h->set_min(lo), h->set_max(hi), h->set_num(n), h->set_sum(sum), h->set_sum_squares(sum_sq);
  for (size_t i = first; i <= last; ++i) {
    h->add_bucket_limit(edges[i]);
    h->add_bucket(counts[i]);
  }
  return e.SerializeAsString();
}
}  // namespace

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, int64_t step,
                                  std::optional<double> wall_time) {
  EMBER_CHECK(values.defined(), "add_histogram('", tag, "'): the tensor is undefined");
  // A copy of its own (to() may hand back the caller's storage, which training changes next).
  const Tensor x = values.detach().to(Device::cpu(), DType::Float64).contiguous().clone();
  enqueue([tag, x, e = event_at(step, wall_time)] { return histogram_event(tag, x, e); });
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step,
                             std::optional<double> wall_time) {
  tensorboard::Event e = event_at(step, wall_time);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* t = v->mutable_tensor();
  t->set_dtype(7);  // DT_STRING
  t->mutable_tensor_shape()->add_dim()->set_size(1);
  t->add_string_val(text);
  enqueue([s = e.SerializeAsString()] { return s; });
}

}  // namespace ember
