// Every file Ember writes for a user (checkpoints, vocabularies, images, the simulator's reports,
// metrics logs when they are rewritten) goes through write_file_atomic, so that a crash never
// leaves a half-written file under the real name and nothing that is not a regular file is ever
// replaced:
// - a regular file (or nothing) at `path`: the data goes to a temporary file in the same folder,
//   which is flushed, fsynced and renamed over the target, and the folder is fsynced so the rename
//   itself survives a power cut; a replaced file keeps its permission bits, a new one gets 0666
//   less the umask, as with open(2);
// - a symbolic link: the same, at the file it points to (the link stays a link); a link to
//   nothing is refused, since creating its target is rarely what was meant;
// - a pipe or a character device (/dev/stdout, a shell's >(...), a terminal): the data is written
//   straight into it, as `cmd > path` would; a pipe nobody reads is an error, not a hang, and a
//   device that refuses the data (/dev/full) is an error;
// - a folder, a block device or a socket: refused, untouched.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace ember {

// Calls `write` with a FILE* open on a temporary file next to `path` (or on `path` itself, for a
// pipe or a character device), then publishes it. If `write` throws or any step fails, the
// temporary file is removed and an ember::Error (or the writer's exception) propagates; a regular
// file at `path` is untouched.
void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& write);

// The same for content already in memory.
void write_file_atomic(const std::string& path, std::string_view content);

// Removes the temporary files that writes into folder `dir` left there when their process died
// mid-write (".NAME.tmp.XXXXXX"; a killed writer cannot clean up after itself). Only for a folder
// that no other process is writing into at the same time, e.g. a training run's own checkpoint
// folder when the run starts. Returns how many it removed; never touches anything but regular
// files of that pattern.
int remove_stale_temporaries(const std::string& dir);

// fwrite that throws an ember::Error naming `what` on a short write.
void write_all(std::FILE* f, const void* data, size_t n, const std::string& what);

}  // namespace ember
