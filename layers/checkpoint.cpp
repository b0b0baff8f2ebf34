#include "layers/checkpoint.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint.pb.h"
#include "core/atomic_file.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/input_file.h"

namespace ember {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'R', 'C', 'K', 'P', 'T'};
constexpr uint64_t kAlign = 64;
constexpr size_t kPreamble = 24;  // magic, version, reserved, header length

uint64_t align_up(uint64_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

// Tensor bytes move in pieces of at most this size, so no single fwrite/fread and no call of
// zlib's crc32 (whose length is a 32-bit uInt) ever sees a tensor beyond 2 GB whole.
uint64_t g_io_chunk = uint64_t{1} << 30;

proto::DType to_proto(DType t) {
  return static_cast<proto::DType>(static_cast<int>(t));
}

DType from_proto(int v, const std::string& where) {
  EMBER_CHECK(v >= 0 && v < kNumDTypes, "checkpoint: ", where, " has unknown dtype code ", v);
  return static_cast<DType>(v);
}

uint32_t crc_of(const void* data, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, g_io_chunk));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

void write_chunked(std::FILE* f, const void* data, uint64_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  for (uint64_t done = 0; done < n;) {
    const uint64_t k = std::min(n - done, g_io_chunk);
    write_all(f, p + done, static_cast<size_t>(k), path);
    done += k;
  }
}

bool read_chunked(std::FILE* f, void* data, uint64_t n) {
  auto* p = static_cast<char*>(data);
  for (uint64_t done = 0; done < n;) {
    const uint64_t k = std::min(n - done, g_io_chunk);
    if (std::fread(p + done, 1, static_cast<size_t>(k), f) != k) return false;
    done += k;
  }
  return true;
}

// Collects tensors to write: each gets a record whose offset points into the data section.
class TensorWriter {
 public:
  void add(proto::TensorRecord* rec, const std::string& name, const Tensor& t) {
    EMBER_CHECK(t.defined(), "checkpoint: tensor '", name, "' is undefined");
    Tensor c;
    {
      NoGradGuard ng;
      c = t.detach().cpu().contiguous();
    }
    rec->set_name(name);
    rec->set_dtype(to_proto(c.dtype()));
    for (int64_t s : c.shape()) rec->add_shape(s);
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.itemsize();
    rec->set_offset(next_);
    rec->set_nbytes(nbytes);
    rec->set_crc32(crc_of(c.raw_data(), nbytes));
    blobs_.push_back({next_, c, nbytes});
    next_ = align_up(next_ + nbytes);
  }
  void write(std::FILE* f, const std::string& path) const {
    static const char zeros[kAlign] = {};
    uint64_t pos = 0;
    for (const auto& b : blobs_) {
      write_all(f, zeros, b.offset - pos, path);
      write_chunked(f, b.data.raw_data(), b.nbytes, path);
      pos = b.offset + b.nbytes;
    }
  }

 private:
  struct Blob {
    uint64_t offset;
    Tensor data;
    uint64_t nbytes;
  };
  std::vector<Blob> blobs_;
  uint64_t next_ = 0;
};

class TensorReader {
 public:
  TensorReader(std::FILE* f, const std::string& path, uint64_t data_start, uint64_t file_size)
      : f_(f), path_(path), data_start_(data_start), file_size_(file_size) {}

  Tensor read(const proto::TensorRecord& rec) const {
    const std::string where = "'" + path_ + "' tensor '" + rec.name() + "'";
    DType dt = from_proto(rec.dtype(), where);
    Shape shape(rec.shape().begin(), rec.shape().end());
    // The size is computed with overflow checks: a corrupt shape must give an error, not a
    // wrapped-around byte count.
    uint64_t nbytes = itemsize(dt);
    for (int64_t s : shape) {
      EMBER_CHECK(s >= 0, "checkpoint: ", where, " has a negative size in shape ", shape_str(shape));
      EMBER_CHECK(!__builtin_mul_overflow(nbytes, static_cast<uint64_t>(s), &nbytes), "checkpoint: ", where,
                  " has an impossible shape ", shape_str(shape), " (its byte count overflows)");
    }
    EMBER_CHECK(nbytes == rec.nbytes(), "checkpoint: ", where, " declares ", rec.nbytes(), " bytes but shape ",
                shape_str(shape), " of ", dtype_name(dt), " needs ", nbytes);
    EMBER_CHECK(rec.offset() <= file_size_ && nbytes <= file_size_ && data_start_ + rec.offset() + nbytes <= file_size_,
                "checkpoint: ", where, " lies beyond the end of the file (the file is truncated)");
    Tensor t = empty(shape, {dt, Device::cpu()});
    if (nbytes > 0) {
      EMBER_CHECK(::fseeko(f_, static_cast<off_t>(data_start_ + rec.offset()), SEEK_SET) == 0 &&
                      read_chunked(f_, t.raw_data(), nbytes),
                  "checkpoint: cannot read ", where, " (truncated file?)");
    }
    EMBER_CHECK(crc_of(t.raw_data(), nbytes) == rec.crc32(), "checkpoint: ", where,
                " fails its CRC32 check (the file is corrupt)");
    return t;
  }

 private:
  std::FILE* f_;
  std::string path_;
  uint64_t data_start_, file_size_;
};

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

namespace checkpoint_detail {
void set_io_chunk_bytes(uint64_t bytes) {
  EMBER_CHECK(bytes >= 1 && bytes <= (uint64_t{1} << 30), "checkpoint: the I/O chunk must be 1 byte to 1 GiB, not ",
              bytes);
  g_io_chunk = bytes;
}
uint64_t io_chunk_bytes() {
  return g_io_chunk;
}
}  // namespace checkpoint_detail

void write_checkpoint(const std::string& path, const CheckpointContents& c) {
  proto::Checkpoint header;
  header.set_format_version(kCheckpointFormatVersion);
  TensorWriter tw;
  for (const auto& [name, t] : c.model_parameters) tw.add(header.mutable_model()->add_parameters(), name, t);
  for (const auto& [name, t] : c.model_buffers) tw.add(header.mutable_model()->add_buffers(), name, t);
  for (const auto& os : c.optimizers) {
    proto::OptimizerState* po = header.add_optimizers();
    po->set_type(os.optimizer);
    int64_t index = 0;
    for (size_t g = 0; g < os.groups.size(); ++g) {
      proto::ParamGroup* pg = po->add_groups();
      for (const auto& [k, v] : os.groups[g]) (*pg->mutable_hyperparameters())[k] = v;
      const auto& states = g < os.params.size() ? os.params[g] : std::vector<optim::ParamState>{};
      for (const auto& ps : states) {
        pg->add_params(index);
        if (ps.step != 0 || !ps.tensors.empty()) {
          proto::ParamState* pps = po->add_states();
          pps->set_param(index);
          pps->set_step(ps.step);
          for (const auto& [tn, tt] : ps.tensors) tw.add(pps->add_tensors(), tn, tt);
        }
        ++index;
      }
    }
  }
  for (const auto& ss : c.schedulers) {
    proto::SchedulerState* ps = header.add_schedulers();
    ps->set_kind(ss.kind);
    for (const auto& [k, v] : ss.state) (*ps->mutable_state())[k] = v;
  }
  for (const auto& [name, gs] : c.generators) {
    proto::GeneratorState* pg = header.add_generators();
    pg->set_name(name);
    pg->set_seed(gs.seed);
    pg->set_offset(gs.offset);
  }
  proto::TrainingPosition* pp = header.mutable_position();
  pp->set_epoch(c.position.epoch);
  pp->set_step(c.position.step);
  pp->set_loader_epoch(c.position.loader_epoch);
  pp->set_loader_batch(c.position.loader_batch);
  pp->set_world_size(c.position.world_size);
  pp->set_rank(c.position.rank);
  for (const auto& [k, v] : c.metadata) (*header.mutable_metadata())[k] = v;
  for (const auto& [name, t] : c.extra_tensors) tw.add(header.add_extra_tensors(), name, t);
  if (c.grad_scaler) {
    proto::GradScalerState* gs = header.mutable_grad_scaler();
    gs->set_scale(c.grad_scaler->scale);
    gs->set_growth_tracker(c.grad_scaler->growth_tracker);
    gs->set_growth_factor(c.grad_scaler->growth_factor);
    gs->set_backoff_factor(c.grad_scaler->backoff_factor);
    gs->set_growth_interval(c.grad_scaler->growth_interval);
    gs->set_enabled(c.grad_scaler->enabled);
  }
  header.set_precision(c.precision);

  // Deterministic: Protobuf writes maps in hash order otherwise, and the same state would give
  // different files from save to save.
  std::string head;
  {
    google::protobuf::io::StringOutputStream stream(&head);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    EMBER_CHECK(header.SerializeToCodedStream(&coded) && !coded.HadError(),
                "checkpoint: cannot serialise the header of '", path, "'");
  }
  std::string pre(kMagic, kMagic + 8);
  put_u32(pre, kCheckpointFormatVersion);
  put_u32(pre, 0);
  put_u64(pre, head.size());
  const uint64_t data_start = align_up(kPreamble + head.size());
  write_file_atomic(path, [&](std::FILE* f) {
    write_all(f, pre.data(), pre.size(), path);
    write_all(f, head.data(), head.size(), path);
    static const char zeros[kAlign] = {};
    write_all(f, zeros, data_start - kPreamble - head.size(), path);
    tw.write(f, path);
  });
}

namespace {
// The loss scaler's state in a header, when it has one.
std::optional<optim::GradScalerState> grad_scaler_of(const proto::Checkpoint& h) {
  if (!h.has_grad_scaler()) return std::nullopt;
  const auto& gs = h.grad_scaler();
  return optim::GradScalerState{gs.scale(),          gs.growth_tracker(),  gs.growth_factor(),
                                gs.backoff_factor(), gs.growth_interval(), gs.enabled()};
}
}  // namespace

CheckpointContents read_checkpoint(const std::string& path) {
  const InputFile f = open_input_file(path, "an Ember checkpoint");
  std::error_code ec;
  EMBER_CHECK(std::filesystem::is_regular_file(path, ec), path,
              ": is not a regular file (expected an Ember checkpoint)");
  const uint64_t file_size = std::filesystem::file_size(path);
  unsigned char pre[kPreamble];
  EMBER_CHECK(file_size >= kPreamble && std::fread(pre, 1, kPreamble, f.get()) == kPreamble, "checkpoint: '", path,
              "' is too short to be an Ember checkpoint (", file_size, " bytes)");
  EMBER_CHECK(std::memcmp(pre, kMagic, 8) == 0, "checkpoint: '", path,
              "' is not an Ember checkpoint (bad magic; expected \"EMBRCKPT\")");
  const uint32_t version = static_cast<uint32_t>(get_le(pre + 8, 4));
  EMBER_CHECK(version == kCheckpointFormatVersion, "checkpoint: '", path, "' has format version ", version,
              " but this build reads version ", kCheckpointFormatVersion);
  const uint64_t head_len = get_le(pre + 16, 8);
  EMBER_CHECK(head_len <= file_size - kPreamble, "checkpoint: '", path, "' is truncated (header of ", head_len,
              " bytes, file of ", file_size, ")");
  std::string head(head_len, '\0');
  EMBER_CHECK(std::fread(head.data(), 1, head_len, f.get()) == head_len, "checkpoint: cannot read the header of '",
              path, "'");
  proto::Checkpoint h;
  EMBER_CHECK(h.ParseFromString(head), "checkpoint: the header of '", path, "' is corrupt");
  TensorReader tr(f.get(), path, align_up(kPreamble + head_len), file_size);

  CheckpointContents c;
  for (const auto& r : h.model().parameters()) c.model_parameters.emplace_back(r.name(), tr.read(r));
  for (const auto& r : h.model().buffers()) c.model_buffers.emplace_back(r.name(), tr.read(r));
  for (int oi = 0; oi < h.optimizers_size(); ++oi) {
    const auto& po = h.optimizers(oi);
    optim::OptimizerState os;
    os.optimizer = po.type();
    // The groups list each parameter once, by an index below the number they list; a state belongs
    // to a listed parameter, once, with a step >= 0; hyperparameters are finite. A state that
    // matched nothing used to be dropped without a word (that parameter resumed with fresh moments).
    const std::string where = detail::concat("checkpoint: '", path, "': optimizer ", oi, " (", po.type(), ")");
    int64_t listed_count = 0;
    for (const auto& pg : po.groups()) listed_count += pg.params_size();
    std::set<int64_t> listed;
    for (const auto& pg : po.groups()) {
      for (int64_t idx : pg.params())
        EMBER_CHECK(idx >= 0 && idx < listed_count && listed.insert(idx).second, where, " lists parameter index ", idx,
                    " out of range [0, ", listed_count, ") or twice");
      for (const auto& [k, v] : pg.hyperparameters())
        EMBER_CHECK(std::isfinite(v), where, ": hyperparameter '", k, "' is ", v, ", expected a finite number");
    }
    std::map<int64_t, const proto::ParamState*> by_index;
    for (const auto& ps : po.states()) {
      EMBER_CHECK(listed.count(ps.param()), where, " has a state for parameter index ", ps.param(),
                  ", which no parameter group lists");
      EMBER_CHECK(by_index.emplace(ps.param(), &ps).second, where, " has two states for parameter index ", ps.param());
      EMBER_CHECK(ps.step() >= 0, where, ": parameter ", ps.param(), " has step ", ps.step(), ", expected >= 0");
    }
    for (const auto& pg : po.groups()) {
      os.groups.emplace_back(pg.hyperparameters().begin(), pg.hyperparameters().end());
      std::vector<optim::ParamState> states;
      for (int64_t idx : pg.params()) {
        optim::ParamState s;
        auto it = by_index.find(idx);
        if (it != by_index.end()) {
          s.step = it->second->step();
          for (const auto& r : it->second->tensors()) s.tensors.emplace_back(r.name(), tr.read(r));
        }
        states.push_back(std::move(s));
      }
      os.params.push_back(std::move(states));
    }
    c.optimizers.push_back(std::move(os));
  }
  for (const auto& g : h.generators()) c.generators.emplace_back(g.name(), GeneratorState{g.seed(), g.offset()});
  for (const auto& s : h.schedulers())
    c.schedulers.push_back({s.kind(), std::map<std::string, double>(s.state().begin(), s.state().end())});
  const auto& p = h.position();
  c.position = {p.epoch(), p.step(), p.loader_epoch(), p.loader_batch(), p.world_size(), p.rank()};
  c.metadata.insert(h.metadata().begin(), h.metadata().end());
  for (const auto& r : h.extra_tensors()) c.extra_tensors.emplace_back(r.name(), tr.read(r));
  c.grad_scaler = grad_scaler_of(h);
  c.precision = h.precision();
  return c;
}

// ------------------------------------------------------------ conveniences

namespace {

void split_state(const nn::Module& m, CheckpointContents& c) {
  std::set<std::string> params;
  for (const auto& [name, t] : m.named_parameters()) params.insert(name);
  for (auto& [name, t] : m.state_dict())
    (params.count(name) ? c.model_parameters : c.model_buffers).emplace_back(name, t);
}

void load_into(nn::Module& m, const CheckpointContents& c, bool strict) {
  m.load_state_dict(c.model_state(), strict);
}

}  // namespace

nn::StateDict CheckpointContents::model_state() const {
  nn::StateDict sd = model_parameters;
  sd.insert(sd.end(), model_buffers.begin(), model_buffers.end());
  return sd;
}

ScheduleRef::ScheduleRef(optim::LRScheduler* s)
    : kind_("LRScheduler"),
      save_([s] { return s->state_dict(); }),
      load_([s](const std::map<std::string, double>& m) { s->load_state_dict(m); }) {
  EMBER_CHECK(s != nullptr, "TrainingState: a null LR schedule");
}

ScheduleRef::ScheduleRef(optim::ReduceLROnPlateau* s)
    : kind_("ReduceLROnPlateau"),
      save_([s] { return s->state_dict(); }),
      load_([s](const std::map<std::string, double>& m) { s->load_state_dict(m); }) {
  EMBER_CHECK(s != nullptr, "TrainingState: a null ReduceLROnPlateau");
}

void save(const nn::Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  CheckpointContents c;
  split_state(module, c);
  c.metadata = metadata;
  write_checkpoint(path, c);
}

void load(nn::Module& module, const std::string& path, bool strict) {
  load_into(module, read_checkpoint(path), strict);
}

void save(const optim::Optimizer& optimizer, const std::string& path) {
  CheckpointContents c;
  c.optimizers.push_back(optimizer.state_dict());
  write_checkpoint(path, c);
}

void load(optim::Optimizer& optimizer, const std::string& path) {
  CheckpointContents c = read_checkpoint(path);
  EMBER_CHECK(c.optimizers.size() == 1, "checkpoint: '", path, "' holds ", c.optimizers.size(),
              " optimizer states (expected 1)");
  optimizer.load_state_dict(c.optimizers[0]);
}

void save_training(const std::string& path, const TrainingState& state, const TrainingPosition& position,
                   const std::map<std::string, std::string>& metadata) {
  CheckpointContents c;
  if (state.model) split_state(*state.model, c);
  for (const optim::Optimizer* o : state.optimizers) c.optimizers.push_back(o->state_dict());
  for (const auto& [name, g] : state.generators) c.generators.emplace_back(name, g->state());
  for (const ScheduleRef& s : state.schedulers) c.schedulers.push_back({s.kind(), s.state_dict()});
  c.position = position;
  c.metadata = metadata;
  if (state.grad_scaler) c.grad_scaler = state.grad_scaler->state_dict();
  c.precision = state.precision;
  write_checkpoint(path, c);
}

std::pair<TrainingPosition, std::map<std::string, std::string>> load_training(const std::string& path,
                                                                              const TrainingState& state) {
  CheckpointContents c = read_checkpoint(path);
  EMBER_CHECK(c.optimizers.size() == state.optimizers.size(), "checkpoint: '", path, "' holds ", c.optimizers.size(),
              " optimizer states but the program has ", state.optimizers.size());
  std::map<std::string, GeneratorState> gens(c.generators.begin(), c.generators.end());
  for (const auto& [name, g] : state.generators)
    EMBER_CHECK(gens.count(name), "checkpoint: '", path, "' has no state for generator '", name, "'");
  EMBER_CHECK(c.schedulers.size() == state.schedulers.size(), "checkpoint: '", path, "' holds ", c.schedulers.size(),
              " LR schedules but the program has ", state.schedulers.size());
  for (size_t i = 0; i < c.schedulers.size(); ++i)
    EMBER_CHECK(c.schedulers[i].kind == state.schedulers[i].kind(), "checkpoint: '", path, "' LR schedule ", i,
                " is a ", c.schedulers[i].kind, " but the program's is a ", state.schedulers[i].kind());
  const std::string file_precision = c.precision.empty() ? "fp32" : c.precision;
  EMBER_CHECK(state.precision.empty() || file_precision == state.precision, "checkpoint: '", path, "' was trained in ",
              file_precision, " but this run's precision is ", state.precision);
  EMBER_CHECK(!c.grad_scaler || state.grad_scaler, "checkpoint: '", path,
              "' holds a loss scaler's state (fp16 training) but the program has no GradScaler");
  if (c.grad_scaler) {
    optim::GradScaler probe;  // validates the stored state before anything changes
    probe.load_state_dict(*c.grad_scaler);
  }
  // Everything is validated before anything changes: the model and optimizers check all of
  // their mismatches before copying. The schedules go first and are put back if anything after
  // them refuses.
  std::vector<std::map<std::string, double>> before;
  try {
    for (size_t i = 0; i < state.schedulers.size(); ++i) {
      before.push_back(state.schedulers[i].state_dict());
      state.schedulers[i].load_state_dict(c.schedulers[i].state);
    }
    if (state.model) load_into(*state.model, c, true);
    for (size_t i = 0; i < state.optimizers.size(); ++i) state.optimizers[i]->load_state_dict(c.optimizers[i]);
  } catch (...) {
    for (size_t i = 0; i < before.size(); ++i) state.schedulers[i].load_state_dict(before[i]);
    throw;
  }
  for (const auto& [name, g] : state.generators) g->set_state(gens[name]);
  if (c.grad_scaler) state.grad_scaler->load_state_dict(*c.grad_scaler);
  return {c.position, c.metadata};
}

}  // namespace ember
