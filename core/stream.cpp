#include "core/stream.h"

#include "core/error.h"

namespace ember {

namespace {

class CpuStream final : public Stream {
 public:
  explicit CpuStream(StreamKind k) : kind_(k) {}
  Device device() const override { return Device::cpu(); }
  StreamKind kind() const override { return kind_; }
  void synchronize() override {}
  void wait(const Event&) override {}

 private:
  StreamKind kind_;
};

class CpuEvent final : public Event {
 public:
  void record(Stream&) override {}
  bool query() const override { return true; }
  void synchronize() override {}
};

StreamFactory g_factories[kNumDeviceTypes];

}  // namespace

void register_stream_factory(DeviceType t, StreamFactory f) {
  g_factories[static_cast<int>(t)] = f;
}

Stream& get_stream(Device d, StreamKind kind) {
  if (d.is_cpu()) {
    static CpuStream streams[3] = {CpuStream(StreamKind::Compute), CpuStream(StreamKind::Copy),
                                   CpuStream(StreamKind::Communication)};
    return streams[static_cast<int>(kind)];
  }
  auto& f = g_factories[static_cast<int>(d.type)];
  EMBER_CHECK(f.get, "device ", d, ": no streams registered (was Ember built with CUDA?)");
  return f.get(d, kind);
}

std::unique_ptr<Event> make_event(Device d) {
  if (d.is_cpu()) return std::make_unique<CpuEvent>();
  auto& f = g_factories[static_cast<int>(d.type)];
  EMBER_CHECK(f.event, "device ", d, ": no events registered (was Ember built with CUDA?)");
  return f.event(d);
}

}  // namespace ember
