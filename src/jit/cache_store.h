#pragma once
// The on-disk half of the JIT cache. One folder per key holding source.cu, kernel.cubin and meta.json.
// Entries appear only through rename() of a fully written temporary folder, so a reader sees a whole
// entry or none; an entry damaged afterwards (disk full, hand edits) fails validation and is discarded.
#include <optional>
#include <string>
#include <vector>

#include "flexattn/jit.h"

namespace flexattn::jit::disk {

enum class ReadStatus { found, missing, corrupt };

// Reads and validates <dir>/<key>: meta.json parses and names `key`, the cubin has meta's size and
// SHA-256, and source.cu equals `source`. On `corrupt`, *problem says what was wrong.
ReadStatus read_entry(const std::string& dir, const std::string& key, const std::string& source,
                      CompiledKernel* out, std::string* problem);

struct WriteInfo {
  std::vector<std::string> options;
  std::string nvrtc_version, library_version, bundle_hash;
  double compile_ms = 0;
};

// Stores `k` as <dir>/<k.key>. Returns the entry folder ("" when the cache is not writable, which is
// not an error: the kernel still works from memory). *lost is set when another process stored the key
// first; its entry is kept.
std::string write_entry(const std::string& dir, const CompiledKernel& k, const std::string& source,
                        const WriteInfo& info, bool* lost);

// Moves the entry out of the way atomically, then deletes it.
void discard_entry(const std::string& entry_dir);

// Best effort: keeps the source and log of a failed compile in <dir>/failed/<key>/; returns that folder or "".
std::string save_failed(const std::string& dir, const std::string& key, const std::string& source,
                        const std::string& log);

std::vector<CacheEntry> list_entries(const std::string& dir);
int clear_entries(const std::string& dir);

}  // namespace flexattn::jit::disk
