#pragma once
// Every user-facing failure is a flexattn::Error whose message names the argument and what was expected.
#include <stdexcept>
#include <string>

namespace flexattn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws Error(message) when `ok` is false. Used for argument validation at API boundaries.
inline void check(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace flexattn
