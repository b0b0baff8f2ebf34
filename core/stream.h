// Streams and events: the ordering primitives that the CUDA backend implements with real CUDA
// streams and that the CPU implements trivially (work is synchronous, so every event has already
// happened). Data-parallel code and the loader use these so one code path serves both devices.
#pragma once

#include <memory>

#include "core/device.h"

namespace ember {

enum class StreamKind { Compute, Copy, Communication };

class Event;

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual StreamKind kind() const = 0;
  virtual void synchronize() = 0;
  // Makes future work on this stream wait until `e` has completed.
  virtual void wait(const Event& e) = 0;
  virtual void* native_handle() const { return nullptr; }
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& s) = 0;
  virtual bool query() const = 0;  // true when complete
  virtual void synchronize() = 0;
  virtual void* native_handle() const { return nullptr; }
};

// The stream of `kind` for device `d` (CUDA streams are registered by the CUDA backend).
Stream& get_stream(Device d, StreamKind kind = StreamKind::Compute);
std::unique_ptr<Event> make_event(Device d);

struct StreamFactory {
  Stream& (*get)(Device, StreamKind) = nullptr;
  std::unique_ptr<Event> (*event)(Device) = nullptr;
};
void register_stream_factory(DeviceType t, StreamFactory f);

}  // namespace ember
