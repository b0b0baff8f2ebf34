#include "data/idx.h"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace ember::data {

std::string read_file_maybe_gz(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  EMBER_CHECK(probe.good(), "read: cannot open '", path, "'");
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files transparently too
  EMBER_CHECK(f != nullptr, "read: cannot open '", path, "'");
  std::string out;
  std::vector<char> buf(1 << 20);
  while (true) {
    int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      EMBER_FAIL("read: '", path, "' is corrupt or truncated (", msg, ")");
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  // A gzip stream cut short reads as a clean EOF on some zlib versions; gzclose reports it.
  int rc = gzclose(f);
  EMBER_CHECK(rc == Z_OK || rc == Z_BUF_ERROR, "read: '", path, "' is corrupt or truncated (gzip error ", rc, ")");
  EMBER_CHECK(rc == Z_OK, "read: '", path, "' is a truncated gzip file");
  return out;
}

namespace {

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Tensor read_idx(const std::string& path) {
  const std::string bytes = read_file_maybe_gz(path);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  EMBER_CHECK(bytes.size() >= 4, "read_idx: '", path, "' is too short to be an IDX file (", bytes.size(), " bytes)");
  EMBER_CHECK(p[0] == 0 && p[1] == 0, "read_idx: '", path,
              "' is not an IDX file (expected magic 0x0000TTNN, got first bytes ", int(p[0]), ", ", int(p[1]), ")");
  const int type = p[2], ndim = p[3];
  size_t esize = 0;
  DType dt = DType::UInt8;
  switch (type) {
    case 0x08:
      esize = 1;
      dt = DType::UInt8;
      break;
    case 0x09:
      esize = 1;
      dt = DType::Int32;
      break;
    case 0x0B:
      esize = 2;
      dt = DType::Int32;
      break;
    case 0x0C:
      esize = 4;
      dt = DType::Int32;
      break;
    case 0x0D:
      esize = 4;
      dt = DType::Float32;
      break;
    case 0x0E:
      esize = 8;
      dt = DType::Float64;
      break;
    default:
      EMBER_FAIL("read_idx: '", path, "' has unknown IDX element type 0x", std::hex, type);
  }
  EMBER_CHECK(ndim >= 1 && ndim <= 8, "read_idx: '", path, "' declares ", ndim, " dimensions (expected 1 to 8)");
  const size_t header = 4 + 4 * static_cast<size_t>(ndim);
  EMBER_CHECK(bytes.size() >= header, "read_idx: '", path, "' is truncated inside its header");
  Shape shape;
  size_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    uint32_t s = be32(p + 4 + 4 * d);
    EMBER_CHECK(s < (1u << 30), "read_idx: '", path, "' has an implausible dimension ", s);
    shape.push_back(s);
    // The file must hold every element, so a count above its size is already an error; checking
    // as the product grows also keeps it from wrapping around (8 dimensions of 2^29 would).
    count *= s;
    EMBER_CHECK(count <= bytes.size(), "read_idx: '", path, "': its first ", d + 1, " of ", ndim, " dimensions, ",
                shape_str(shape), ", already need more elements than its ", bytes.size(), " bytes hold");
  }
  const size_t expected = header + count * esize;
  EMBER_CHECK(bytes.size() == expected, "read_idx: '", path, "' holds ", bytes.size(), " bytes but its header ",
              shape_str(shape), " requires ", expected, bytes.size() < expected ? " (truncated)" : " (trailing data)");
  Tensor t = empty(shape, {dt, Device::cpu()});
  const unsigned char* src = p + header;
  if (type == 0x08) {
    std::memcpy(t.raw_data(), src, count);
  } else if (type == 0x09) {
    auto* o = t.data_ptr<int32_t>();
    for (size_t i = 0; i < count; ++i) o[i] = static_cast<int8_t>(src[i]);
  } else if (type == 0x0B) {
    auto* o = t.data_ptr<int32_t>();
    for (size_t i = 0; i < count; ++i) o[i] = static_cast<int16_t>((src[2 * i] << 8) | src[2 * i + 1]);
  } else if (esize == 4) {
    auto* o = static_cast<uint32_t*>(t.raw_data());
    for (size_t i = 0; i < count; ++i) o[i] = be32(src + 4 * i);
  } else {
    auto* o = static_cast<uint64_t*>(t.raw_data());
    for (size_t i = 0; i < count; ++i) o[i] = (uint64_t{be32(src + 8 * i)} << 32) | be32(src + 8 * i + 4);
  }
  return t;
}

}  // namespace ember::data
