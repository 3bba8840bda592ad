#pragma once
// The operating-system pieces the JIT leans on: dlopen, environment variables, whole-file I/O.
#include <optional>
#include <string>

namespace flexattn::jit {

// dlopen(path, RTLD_NOW | RTLD_LOCAL). Returns nullptr and sets *error to dlerror() on failure.
// Handles are never closed: cubins, NVRTC programs and driver contexts may outlive any owner,
// and unloading libcuda while a context is alive is undefined.
void* open_library(const std::string& path, std::string* error);
void* find_symbol(void* lib, const char* name);

// fn = the symbol `name` of lib; a required symbol that is absent is appended to `missing` (", "-separated),
// so a loader can report every missing entry point in one message.
template <class Fn>
void bind_symbol(void* lib, const char* name, Fn& fn, bool required, std::string& missing) {
  fn = reinterpret_cast<Fn>(find_symbol(lib, name));
  if (!fn && required) missing += missing.empty() ? name : std::string(", ") + name;
}
// Path of the file that provides `symbol` (dladdr); "" when unknown.
std::string library_path_of(void* symbol);

// getenv as a string; `fallback` when unset or empty.
std::string env_or(const char* name, const std::string& fallback = "");
// The value in lower case ("" when unset): for switches that take words as well as env_flag's (`auto`).
std::string env_lower(const char* name);
// True for "1", "true", "yes", "on", false for "0", "false", "no", "off" (any case); `fallback` when unset,
// empty or anything else.
bool env_flag(const char* name, bool fallback = false);
// A number in [lo, hi]; `fallback` when unset or empty; anything else throws an Error naming the variable.
double env_number(const char* name, double fallback, double lo, double hi);

std::optional<std::string> read_file(const std::string& path);
// Writes the whole file; false on any error (the caller decides whether that matters).
bool write_file(const std::string& path, const std::string& data);

// Milliseconds of a steady clock, for compile timings.
double now_ms();
// UTC time as 2026-01-31T12:00:00Z.
std::string utc_timestamp();

}  // namespace flexattn::jit
