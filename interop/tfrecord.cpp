#include "interop/tfrecord.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace ember::tfrecord {
namespace {

// The reflected CRC-32C table (polynomial 0x82f63b78), built once.
const std::array<uint32_t, 256>& table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> a{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      a[i] = c;
    }
    return a;
  }();
  return t;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  const auto& t = table();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = t[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(std::string_view(out.data(), 8)), 4);
  out.append(data);
  put_le(out, masked_crc32c(data), 4);
  return out;
}

ReadResult read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "TFRecord file '", path, "' cannot be opened");
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ReadResult r;
  uint64_t at = 0;
  while (at < all.size()) {
    const uint64_t left = all.size() - at;
    if (left < 12) {
      r.truncated = true, r.truncated_at = at;
      break;
    }
    const std::string_view header(all.data() + at, 8);
    EMBER_CHECK(get_le(all.data() + at + 8, 4) == masked_crc32c(header), "TFRecord file '", path, "': record ",
                r.records.size(), " at byte ", at, " has a corrupted length (its checksum does not match)");
    const uint64_t n = get_le(all.data() + at, 8);
    if (left - 12 < n || left - 12 - n < 4) {
      r.truncated = true, r.truncated_at = at;
      break;
    }
    const std::string_view data(all.data() + at + 12, n);
    EMBER_CHECK(get_le(all.data() + at + 12 + n, 4) == masked_crc32c(data), "TFRecord file '", path, "': record ",
                r.records.size(), " at byte ", at, " has corrupted data (its checksum does not match)");
    r.records.emplace_back(data);
    at += 16 + n;
  }
  return r;
}

}  // namespace ember::tfrecord
