#pragma once
// Host stand-in for mma.sync (test_decode_row_maps_host.cc): records which accumulator and which B registers
// (load ordinals) each mma would use.
#include <vector>
#include "common/numeric.cuh"
namespace flexattn::kern {
extern std::vector<long>* emu_mmas;
extern const float* emu_acc0;
template <class T>
inline void mma_16816(float (&c)[4], const unsigned (&)[4], unsigned b0, unsigned b1) {
  emu_mmas->push_back(long(c - emu_acc0) * 1000000 + long(b0) * 10 + (b1 == b0));
}
}  // namespace flexattn::kern
