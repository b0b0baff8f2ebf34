// Reader for the IDX format of MNIST and Fashion-MNIST (plain or gzip-compressed, detected from
// the content, not the name). Checks the magic number, the element type, the dimensions and that
// the file holds exactly the bytes the header promises; any mismatch is an ember::Error naming the
// file and what was expected.
#pragma once

#include <string>

#include "core/tensor.h"

namespace ember::data {

// Loads the whole file as a tensor with the header's shape; IDX's unsigned-byte type becomes
// uint8, signed byte int8 is read as int32, int/float/double as int32/float32/float64 (IDX stores
// big-endian; values are converted to host order).
Tensor read_idx(const std::string& path);

// Reads the file's bytes, inflating gzip content; an ember::Error names the file on failure.
std::string read_file_maybe_gz(const std::string& path);

}  // namespace ember::data
