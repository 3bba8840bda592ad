#pragma once
// Host stand-in (test_decode_row_maps_host.cc): the element types as tags; rounding is not exercised.
namespace flexattn::kern {
struct bf16 {};
template <class T>
struct Num {
  static unsigned pack(float, float) { return 0; }
};
}  // namespace flexattn::kern
