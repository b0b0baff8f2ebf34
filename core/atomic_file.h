// Writing files so that a crash never leaves a half-written file under the real name: data goes
// to a temporary file in the same directory, which is flushed, fsynced and renamed over the
// target, and the directory is fsynced so the rename itself survives a power cut. Checkpoints and
// the scheduler's state files are written this way.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

namespace ember {

// Calls `write` with a FILE* open on a temporary file next to `path`, then publishes it
// atomically. If `write` throws or any step fails, the temporary file is removed and an
// ember::Error (or the writer's exception) propagates; `path` is untouched.
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& write);

// fwrite that throws an ember::Error naming `what` on a short write.
void write_all(std::FILE* f, const void* data, size_t n, const std::string& what);

}  // namespace ember
