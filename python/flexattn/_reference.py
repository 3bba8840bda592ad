"""Pure-numpy forward reference of flex_attention (torch's eager math, computed in float64).

For every (b, h, i, j): s = (q_i . k_j) * scale; s' = score_mod(s, b, h, i, j) where the tile of (i, j) is
full or (partial and mask_mod(b, h, i, j)), else -inf; P = softmax_j(s') (all-zero row if fully masked);
out = P (rounded to the query dtype, as torch's eager path does) @ v; lse = logsumexp_j s' (natural log,
-inf if fully masked); max = max_j s'. Unlike torch's eager path, which ignores the block lists and
applies mask_mod everywhere, skipped tiles are masked here, as the fused kernels do; for masks from
create_block_mask the two agree.
"""
from __future__ import annotations

import numpy as np

from ._arrays import round_to_dtype

_CHUNK_ELEMENTS = 1 << 21  # scores evaluated per step: bounds the temporaries to a few tens of MB


def _tile_lookup(tiles, b, h, rows, cols, QB, KVB):
    """Tile class (0 skipped, 1 partial, 2 full) of every (row, col); positions past the table: skipped."""
    t = tiles[b % tiles.shape[0], h % tiles.shape[1]]
    r, c = rows // QB, cols // KVB
    inside = (r < t.shape[0]) & (c < t.shape[1])
    return np.where(inside, t[np.minimum(r, t.shape[0] - 1), np.minimum(c, t.shape[1] - 1)], 0)


def forward(q, k, v, q_dtype, score_mod, mask_mod, tiles, block_size, scale, groups):
    """q [B, Hq, L, E], k [Bkv, Hkv, S, E], v [Bkv, Hkv, S, Ev] (numpy, any float dtype); q_dtype: the
    canonical name of the query dtype; score_mod / mask_mod: TracedMods (score_mod may be None);
    tiles: int8 [Bm, Hm, nQ, nKV] tile classes; groups: query heads per kv head.
    Returns (out float64 rounded to q_dtype, lse float64, max float64)."""
    B, Hq, L, _ = q.shape
    S, Ev = k.shape[2], v.shape[3]
    QB, KVB = block_size
    out = np.zeros((B, Hq, L, Ev))
    lse = np.full((B, Hq, L), -np.inf)
    mx = np.full((B, Hq, L), -np.inf)
    if L == 0 or S == 0:
        return out, lse, mx
    step = max(1, _CHUNK_ELEMENTS // S)
    cols = np.arange(S, dtype=np.int64)[None, :]
    with np.errstate(all="ignore"):
        for b in range(B):
            bk = b if k.shape[0] == B else 0
            for h in range(Hq):
                hk = h // groups
                kk = k[bk, hk].astype(np.float64)
                vv = v[bk, hk].astype(np.float64)
                for r0 in range(0, L, step):
                    r1 = min(L, r0 + step)
                    rows = np.arange(r0, r1, dtype=np.int64)[:, None]
                    s = (q[b, h, r0:r1].astype(np.float64) @ kk.T) * scale
                    if score_mod is not None:
                        s = np.broadcast_to(score_mod.evaluate(score=s, b=b, h=h, q_idx=rows, kv_idx=cols), s.shape)
                    cls = _tile_lookup(tiles, b, h, rows, cols, QB, KVB)
                    keep = cls == 2
                    if (cls == 1).any():
                        m = mask_mod.evaluate(b=b, h=h, q_idx=rows, kv_idx=cols)
                        keep = keep | ((cls == 1) & m)
                    s = np.where(keep, s, -np.inf)
                    row_max = s.max(axis=-1)
                    shift = np.where(row_max == -np.inf, 0.0, row_max)
                    p = np.exp(s - shift[:, None])
                    denom = p.sum(axis=-1)
                    p = np.where(denom[:, None] == 0, 0.0, p / np.where(denom == 0, 1.0, denom)[:, None])
                    p = round_to_dtype(p, q_dtype)
                    out[b, h, r0:r1] = round_to_dtype(p @ vv, q_dtype)
                    lse[b, h, r0:r1] = np.where(denom == 0, -np.inf, shift + np.log(denom))
                    mx[b, h, r0:r1] = row_max
    return out, lse, mx
