#pragma once
// The message of the flexattn::Error a callable throws, or "(no error)": the one helper every test of a
// user-facing error message asserts through.
#include <string>
#include <utility>

#include "flexattn/error.h"

namespace flexattn::test {

template <class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const flexattn::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace flexattn::test
