#pragma once
// Tile sweep of the lab: each candidate tile of the sm80 kernels as a launchable entry (identity
// variant, bf16, D = Dv), so tile_config.h can be chosen by measurement.
#include <functional>
#include <string>
#include <vector>

#include "lab.h"
#include "sm80/tile_config.h"

namespace lab {

struct SweepEntry {
  std::string kind;  // "fwd", "bwd" (main kernel), "dq" (deterministic dQ pass)
  int d;
  flexattn::kern::Sm80Tile tile;
  std::function<void(const AttnParams&)> run;
};

void sweep_register_part0(std::vector<SweepEntry>& out);  // forward
void sweep_register_part1(std::vector<SweepEntry>& out);  // backward main
void sweep_register_part2(std::vector<SweepEntry>& out);  // deterministic dQ

}  // namespace lab
