// TFRecord framing, the container of TensorBoard's event files: each record is its length (uint64,
// little-endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
// data. Writing is a pure function; reading checks every length and checksum, so a file cut off
// by a crash gives its complete records and says where it ends, and a corrupted one is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tfrecord {

// CRC-32C (Castagnoli), and TensorFlow's mask of it: rotate right by 15 bits, add 0xa282ead8.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

// One record, framed.
std::string frame(std::string_view data);

struct ReadResult {
  std::vector<std::string> records;  // the complete, intact records, in order
  bool truncated = false;            // the file ends inside a record (a writer stopped mid-way)
  uint64_t truncated_at = 0;         // byte offset of that last, incomplete record
};

// Reads every record of `path`. A record whose length or data fails its checksum is an
// ember::Error naming the file, the record's number and its byte offset; an incomplete last record
// is reported in the result, not as an error.
ReadResult read_records(const std::string& path);

}  // namespace ember::tfrecord
