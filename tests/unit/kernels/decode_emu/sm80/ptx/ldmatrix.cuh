#pragma once
// Host stand-in for the ldmatrix wrappers (test_decode_row_maps_host.cc): records each lane's 16-byte row address
// (bit 31: the transposed form) instead of loading; the fragment registers get the load's ordinal.
#include <vector>
namespace flexattn::kern {
extern std::vector<unsigned>* emu_loads;
inline void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  emu_loads->push_back(addr);
  for (unsigned& x : r) x = unsigned(emu_loads->size());
}
inline void ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
  emu_loads->push_back(addr | 0x80000000u);
  for (unsigned& x : r) x = unsigned(emu_loads->size());
}
}  // namespace flexattn::kern
