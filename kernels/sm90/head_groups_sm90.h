#pragma once
// Head groups of the sm90 launch orders (forward: fwd_scheduler_sm90.cuh, FwdTileOrder; backward:
// tile_config_sm90_bwd.h, sm90_bwd_grid_tile). Units (heads, or (kv head, kv batch) pairs) form groups whose
// working set fits in about half the L2, so CTAs running at the same time share it; inside a group the ranks go
// first (for each rank, the group's units), and a smaller leftover group (units % group) runs first: run last,
// its longest tiles started when every CTA was busy and ended the launch alone (greedy schedule model, B=2 H=16
// S=8192 D=128: forward causal 534.5 -> 512.5 kv-tile times, bound 512; tests/compile/sm90).
#include "common/params.h"

namespace flexattn::kern {

constexpr long long kL2GroupBudgetBytes = 24ll << 20;  // H100 / H200 L2: 50 MiB

// Units per group: as many as fit kL2GroupBudgetBytes at `unit_bytes` each, at least 1, at most `units`.
FLEXATTN_HD constexpr int l2_group_size(long long unit_bytes, int units) {
  const long long g = kL2GroupBudgetBytes / (unit_bytes > 0 ? unit_bytes : 1);
  return int(g < 1 ? 1 : (g > units ? units : g));
}

// Work item t of `units` x `ranks` items in that order: its group is units [u0, u0 + size), whose items are
// t0 .. t0 + size * ranks - 1, t at position `within` (rank within / size, unit u0 + within % size).
// kSmallFirst = false: the groups in unit order, the smaller one last.
struct HeadGroupSpan {
  int u0, size, t0, within;
};
template <bool kSmallFirst = true>
FLEXATTN_HD constexpr HeadGroupSpan head_group_span(int t, int units, int group, int ranks) {
  if constexpr (!kSmallFirst) {
    const int g = t / (group * ranks), t0 = g * group * ranks;
    return HeadGroupSpan{g * group, group < units - g * group ? group : units - g * group, t0, t - t0};
  }
  const int rest = units - units / group * group;
  if (t < rest * ranks) return HeadGroupSpan{units - rest, rest, 0, t};
  const int g = (t - rest * ranks) / (group * ranks);
  const int t0 = rest * ranks + g * group * ranks;
  return HeadGroupSpan{g * group, group, t0, t - t0};
}

}  // namespace flexattn::kern
