"""BlockMask and create_block_mask against a brute-force dense mask, plus torch's BlockMask behaviours."""
import numpy as np
import pytest

import flexattn
from flexattn import BlockMask
from flexattn import _block_layout


def create_block_mask(*args, **kwargs):
    """numpy arrays even when another test module imported torch (device=None would then mean torch)."""
    return flexattn.create_block_mask(*args, device="numpy", **kwargs)


def create_mask(*args, **kwargs):
    return flexattn.create_mask(*args, device="numpy", **kwargs)

DOC = np.repeat(np.arange(6), [40, 90, 7, 130, 1, 32]).astype(np.int32)  # 300 tokens


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv < 100)


def document(b, h, q, kv):
    return DOC[q] == DOC[kv]


def per_head(b, h, q, kv):
    return (q + h * 37 + b * 11) % 5 != 0


prefix_lm = flexattn.or_masks(causal, lambda b, h, q, kv: kv < 64)
doc_causal = flexattn.and_masks(document, causal)


def dense(mod, B, H, L, S):
    b, h, q, kv = (np.arange(B)[:, None, None, None], np.arange(H)[None, :, None, None],
                   np.arange(L)[None, None, :, None], np.arange(S)[None, None, None, :])
    return np.broadcast_to(mod(b, h, q, kv), (B, H, L, S))


def brute_tiles(m, QB, KVB):
    """(partial, full) tile maps by looping over tiles; padding counts as masked."""
    B, H, L, S = m.shape
    nq, nkv = -(-L // QB), -(-S // KVB)
    partial = np.zeros((B, H, nq, nkv), bool)
    full = np.zeros((B, H, nq, nkv), bool)
    for i in range(nq):
        for j in range(nkv):
            tile = m[:, :, i * QB:(i + 1) * QB, j * KVB:(j + 1) * KVB]
            n = tile.sum(axis=(2, 3))
            is_full = n == QB * KVB
            full[:, :, i, j] = is_full
            partial[:, :, i, j] = (n > 0) & ~is_full
    return partial, full


def members(num, idx):
    """Row lists as Python lists of the first `num` indices."""
    return [list(idx[k][: num[k]]) for k in np.ndindex(num.shape)]


CASES = [(causal, 1, 1, 300, 300, 128), (sliding, 2, 1, 300, 300, (64, 32)), (document, 1, 1, 300, 300, 16),
         (per_head, 2, 3, 45, 70, 8), (prefix_lm, 1, 2, 256, 256, 64), (doc_causal, 1, 1, 300, 300, (32, 64)),
         (causal, 1, 1, 100, 300, (128, 32))]


@pytest.mark.parametrize("mod,B,H,L,S,bs", CASES, ids=[f"{c[0].__name__}-{c[3]}x{c[4]}-{c[5]}" for c in CASES])
def test_create_block_mask_matches_brute_force(mod, B, H, L, S, bs):
    QB, KVB = (bs, bs) if isinstance(bs, int) else bs
    m = dense(mod, B, H, L, S)
    partial, full = brute_tiles(m, QB, KVB)
    bm = create_block_mask(mod, B, H, L, S, BLOCK_SIZE=bs)
    assert bm.BLOCK_SIZE == (QB, KVB) and bm.seq_lengths == (L, S) and bm.shape == (B, H, L, S)
    for arr in (bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.q_indices):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.int32 and arr.flags.c_contiguous
    # kv side: members ascending, then the remaining block ids ascending (torch's stable argsort)
    for got_num, got_idx, want in ((bm.kv_num_blocks, bm.kv_indices, partial),
                                   (bm.full_kv_num_blocks, bm.full_kv_indices, full)):
        np.testing.assert_array_equal(got_num, want.sum(-1))
        for k in np.ndindex(want.shape[:3]):
            cols = list(np.flatnonzero(want[k]))
            rest = [c for c in range(want.shape[3]) if c not in cols]
            assert list(got_idx[k]) == cols + rest
    # q side: the transposes
    for got_num, got_idx, want in ((bm.q_num_blocks, bm.q_indices, partial),
                                   (bm.full_q_num_blocks, bm.full_q_indices, full)):
        wt = np.swapaxes(want, -1, -2)
        np.testing.assert_array_equal(got_num, wt.sum(-1))
        assert members(got_num, got_idx) == [list(np.flatnonzero(wt[k])) for k in np.ndindex(wt.shape[:3])]
    np.testing.assert_array_equal(bm.to_dense(), (partial | full).astype(np.int32))
    np.testing.assert_array_equal(bm.tile_classes(), partial * 1 + full * 2)


def test_tail_tiles_are_never_full():
    bm = create_block_mask(lambda b, h, q, kv: q >= 0, 1, 1, 130, 130, BLOCK_SIZE=64)
    np.testing.assert_array_equal(bm.tile_classes()[0, 0], [[2, 2, 1], [2, 2, 1], [1, 1, 1]])


def test_chunked_evaluation_matches_one_shot(monkeypatch):
    one = create_block_mask(doc_causal, 1, 2, 300, 300, BLOCK_SIZE=16)
    monkeypatch.setattr(_block_layout, "_CHUNK_ELEMENTS", 1000)
    chunked = create_block_mask(doc_causal, 1, 2, 300, 300, BLOCK_SIZE=16)
    for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        np.testing.assert_array_equal(getattr(one, f), getattr(chunked, f))


def test_create_mask_matches_the_dense_mask_and_accepts_score_mods():
    np.testing.assert_array_equal(create_mask(doc_causal, 1, 1, 300, 300), dense(doc_causal, 1, 1, 300, 300))
    out = create_mask(per_head, None, 3, 20, 30)
    assert out.shape == (1, 3, 20, 30) and out.dtype == np.bool_

    def score_mask(s, b, h, q, kv):
        return flexattn.ops.where(q >= kv, s, -float("inf"))
    np.testing.assert_array_equal(create_mask(score_mask, 1, 1, 5, 5)[0, 0], np.tril(np.ones((5, 5), bool)))


def test_from_kv_blocks_builds_the_q_side_and_default_lengths():
    num = np.array([[1, 2]], np.int32)
    idx = np.array([[[0, 1, 2], [0, 2, 1]]], np.int32)
    bm = BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=(16, 32))
    assert bm.seq_lengths == (32, 96) and bm.full_kv_num_blocks is None and bm.mask_mod is flexattn.noop_mask
    np.testing.assert_array_equal(bm.q_num_blocks, [[2, 0, 1]])
    np.testing.assert_array_equal(bm.q_indices, [[[0, 1], [0, 1], [1, 0]]])
    np.testing.assert_array_equal(bm.to_dense(), [[[1, 0, 0], [1, 0, 1]]])
    no_q = BlockMask.from_kv_blocks(num, idx, compute_q_blocks=False)
    assert no_q.q_indices is None and no_q.q_num_blocks is None


@pytest.mark.parametrize("num,idx,full,pattern", [
    ([[3]], [[[0, 1]]], None, r"kv_num_blocks must be in \[0, 2\]"),
    ([[2]], [[[0, 5]]], None, r"kv_indices must be in \[0, 2\) in the first kv_num_blocks entries of each row, got 5"),
    ([[1, 1]], [[[0, 1]]], None, r"kv_num_blocks has shape \(1, 2\) but kv_indices has shape \(1, 1, 2\)"),
    ([1], [0], None, "BlockMask must have at least 2 dimensions"),
    ([[1]], [[[0, 1]]], "half", "full_kv_num_blocks and full_kv_indices must be both provided or omitted"),
])
def test_from_kv_blocks_rejects_malformed_lists(num, idx, full, pattern):
    fnum = np.array([[0]], np.int32) if full == "half" else None
    with pytest.raises((ValueError, RuntimeError), match=pattern):
        BlockMask.from_kv_blocks(np.array(num, np.int32), np.array(idx, np.int32), fnum, None)


def test_getitem_keeps_rank_and_replaces_the_mask_mod():
    bm = create_block_mask(per_head, 2, 3, 64, 64, BLOCK_SIZE=16)
    one = bm[1]
    assert one.kv_num_blocks.shape == (1, 3, 4) and one.kv_indices.shape == (1, 3, 4, 4)
    np.testing.assert_array_equal(one.kv_indices, bm.kv_indices[1:2])
    row = bm[0, 2, 3]
    assert row.kv_num_blocks.shape == (1, 1, 1) and row.seq_lengths == (16, 64)  # the row's tokens (torch)
    np.testing.assert_array_equal(row.full_kv_indices[0, 0, 0], bm.full_kv_indices[0, 2, 3])
    sl = bm[:, 1:3, np.array([0, 2])]
    assert sl.kv_num_blocks.shape == (2, 2, 2)
    assert bm[-1].kv_num_blocks.shape == (1, 3, 4)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        flexattn.trace(one.mask_mod)
    with pytest.raises(IndexError, match="out of range"):
        bm[2]


def test_adjust_crops_to_the_top_left_corner():
    big = create_block_mask(causal, 1, 1, 512, 512, BLOCK_SIZE=64)
    small = big._adjust(200, 300)
    ref = create_block_mask(causal, 1, 1, 200, 300, BLOCK_SIZE=64)
    assert small.seq_lengths == (200, 300) and small.mask_mod is causal
    np.testing.assert_array_equal(small.to_dense(), ref.to_dense())
    np.testing.assert_array_equal(small.kv_num_blocks + small.full_kv_num_blocks,
                                  ref.kv_num_blocks + ref.full_kv_num_blocks)


@pytest.mark.parametrize("by_blocks", [False, True])
def test_sparsity_numel_and_shape(monkeypatch, by_blocks):
    # The installed torch's formula (block_mask._torch_counts_blocks): by area before pytorch#188868, by blocks since.
    monkeypatch.setattr(flexattn.block_mask, "_torch_counts_blocks", lambda: by_blocks)
    bm = create_block_mask(causal, 2, 1, 256, 256, BLOCK_SIZE=64)
    assert bm.numel() == 2 * 256 * 256 and bm.shape == (2, 1, 256, 256)
    assert bm.sparsity() == pytest.approx(100 * 6 / 16)  # 10 of 16 tiles computed: both formulas agree
    odd = create_block_mask(causal, 1, 1, 300, 300, BLOCK_SIZE=128)
    if by_blocks:
        assert odd.sparsity() == pytest.approx(100 * (1 - 6 / 9))  # 6 of the 3 x 3 grid's blocks
    else:
        assert odd.sparsity() == pytest.approx(100 * (1 - 6 * 128 * 128 / 300**2))  # area (negative)


def test_sparsity_formula_follows_the_installed_torch():
    import sys
    flexattn.block_mask._TORCH_FORMULA.clear()
    try:
        counts_blocks = flexattn.block_mask._torch_counts_blocks()
        if "torch" not in sys.modules:
            assert counts_blocks is False
        else:
            from torch.nn.attention.flex_attention import BlockMask as TorchBlockMask
            import torch
            one = torch.ones(1, 1, 1, dtype=torch.int32)
            probe = TorchBlockMask.from_kv_blocks(one, torch.zeros(1, 1, 1, 1, dtype=torch.int32), BLOCK_SIZE=128,
                                                  seq_lengths=(1, 1))
            assert counts_blocks == (probe.sparsity() >= 0)
    finally:
        flexattn.block_mask._TORCH_FORMULA.clear()


def test_to_string_and_str():
    bm = create_block_mask(causal, 1, 1, 256, 256, BLOCK_SIZE=64)
    rows = ["██      ", "████    ", "██████  ", "████████"]
    assert bm.to_string() == "(0, 0)\n" + "\n".join(rows) + "\n"
    assert str(bm) == "BlockMask(shape=(1, 1, 256, 256), sparsity=37.50%, \n(0, 0)\n" + "\n".join(rows).rstrip() + "\n)"
    many = create_block_mask(per_head, 2, 3, 16, 16, BLOCK_SIZE=16).to_string(limit=2)
    assert sum(line.startswith("(") for line in many.splitlines()) == 2 and "To print out more, set BlockMask.to_string(limit=N)" in many
    assert "kv_num_blocks=(1, 1, 4)" in repr(bm) and "mask_mod=causal" in repr(bm)


def test_to_string_groups_tiles_into_cells():
    bm = create_block_mask(causal, 1, 1, 256, 256, BLOCK_SIZE=32)  # 8x8 tiles shown as 4x4 cells
    lines = bm.to_string(grid_size=4).splitlines()
    assert lines[1:] == ["░░      ", "██░░    ", "████░░  ", "██████░░"]


def test_as_tuple_order_matches_torch():
    bm = create_block_mask(causal, 1, 1, 64, 64, BLOCK_SIZE=32)
    t = bm.as_tuple()
    assert t[:2] == (64, 64) and t[2] is bm.kv_num_blocks and t[9] is bm.full_q_indices
    # torch >= 2.12 (when imported in this process) has four dq_* fields after full_q_indices: the layout follows it
    from flexattn.block_mask import _torch_has_dq_fields
    dq = (None,) * 4 if _torch_has_dq_fields() else ()
    assert t[10:] == (*dq, 32, 32, causal) and len(t) == 13 + len(dq)
    assert bm.as_tuple(flatten=False)[0] == (64, 64) and len(bm.as_tuple(flatten=False)) == 11 + len(dq)


def test_argument_errors():
    with pytest.raises(TypeError, match="create_block_mask requires a mask_mod function"):
        create_block_mask(lambda s, b, h, q, kv: s, 1, 1, 8, 8)
    with pytest.raises(ValueError, match="Q_LEN must be a positive integer, got 0"):
        create_block_mask(causal, 1, 1, 0, 8)
    with pytest.raises(ValueError, match="KV_LEN must be a positive integer, got 8.5"):
        create_block_mask(causal, 1, 1, 8, 8.5)
    with pytest.raises(ValueError, match="H must be a positive integer, got True"):
        create_block_mask(causal, 1, True, 8, 8)
    # integral values of other types, as torch takes them (a float from shape arithmetic, a 0-d array)
    bm = create_block_mask(causal, np.int64(2), 1, 8.0, np.array(8), BLOCK_SIZE=4)
    assert bm.seq_lengths == (8, 8) and bm.kv_num_blocks.shape == (2, 1, 2)
    with pytest.raises(ValueError, match=r"BLOCK_SIZE must be a positive int or a pair"):
        create_block_mask(causal, 1, 1, 8, 8, BLOCK_SIZE=(8, 0))
    with pytest.raises(RuntimeError, match="All inputs should be callable mask_mods"):
        flexattn.and_masks(causal, 3)
    with pytest.warns(DeprecationWarning):
        create_block_mask(causal, 1, 1, 8, 8, _compile=True)


def test_numpy_device_without_torch():
    import sys
    if "torch" in sys.modules:
        pytest.skip("torch is imported: device=None / 'cpu' mean torch tensors")
    bm = flexattn.create_block_mask(causal, 1, 1, 64, 64, device="cpu", BLOCK_SIZE=32)
    assert isinstance(bm.kv_indices, np.ndarray) and bm.device == "cpu"
    assert isinstance(flexattn.create_block_mask(causal, 1, 1, 64, 64).kv_indices, np.ndarray)
    with pytest.raises(ValueError, match="device='cuda' needs torch, which is not installed"):
        try:
            import torch  # noqa: F401
            pytest.skip("torch is installed")
        except ImportError:
            flexattn.create_block_mask(causal, 1, 1, 64, 64, device="cuda")


def test_empty_combinators():
    assert flexattn.trace(flexattn.and_masks()).text == "true"
    assert flexattn.trace(flexattn.or_masks()).text == "false"
    assert flexattn.trace(flexattn.noop_mask).text == "true"


# ---- torch-compatibility fixes found by comparing with torch 2.15 on the CPU (session 36) ----------------
def test_query_block_slice_keeps_only_the_selected_rows_tokens():
    """bm[:, :, i] kept seq_lengths[0] = Q_LEN, so sparsity counted every row and flex_attention refused the
    sliced mask with the matching query chunk ("created for a larger length"); torch keeps the rows' tokens."""
    bm = create_block_mask(causal, 2, 2, 300, 300)  # query blocks of 128, 128, 44 tokens
    expect = [(1, 128), (-1, 44), (slice(0, 2), 256), (slice(1, None), 172), (slice(None, None, 2), 172),
              (slice(0, 3, 2), 172), (slice(0, 1, 2), 128), (slice(2, 2), 0)]
    for ix, q_len in expect:
        assert bm[:, :, ix].seq_lengths == (q_len, 300), ix
    assert bm[:, :, np.array([0, 2])].seq_lengths == (256, 300)  # index arrays count whole blocks, as torch
    assert bm[0].seq_lengths == (300, 300) and bm[:, 1].seq_lengths == (300, 300)
    row = bm[:, :, 1]
    q, k, v = (np.random.default_rng(0).standard_normal((2, 2, 300, 16)) for _ in range(3))
    row.mask_mod = lambda b, h, qi, kv: qi + 128 >= kv
    part = flexattn.flex_attention(q[:, :, 128:256], k, v, block_mask=row)
    whole = flexattn.flex_attention(q, k, v, block_mask=bm)
    np.testing.assert_allclose(part, whole[:, :, 128:256], rtol=0, atol=1e-12)


def test_a_bool_index_is_an_int_as_in_torch():
    """bm[True] made a 5-D mask (numpy's new-axis reading of a bool); torch indexes 1."""
    bm = create_block_mask(lambda b, h, q, kv: (q >= kv) | (b == 1), 2, 1, 256, 256)
    for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        np.testing.assert_array_equal(getattr(bm[True], f), getattr(bm[1], f))
    assert bm[True].kv_num_blocks.shape == (1, 1, 2)


def test_block_mask_init_defaults_and_integer_indices():
    bm = create_block_mask(causal, 1, 1, 256, 256)
    fields = [getattr(bm, f) for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                                       "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")]
    plain = BlockMask((256, 256), *fields)  # torch defaults BLOCK_SIZE and mask_mod
    assert plain.BLOCK_SIZE == (128, 128) and plain.mask_mod is flexattn.noop_mask
    with pytest.raises(TypeError, match="kv_indices: expected an integer tensor or array, got dtype float64"):
        BlockMask.from_kv_blocks(np.ones((1, 1, 1), np.int32), np.full((1, 1, 1, 1), 0.7))
    with pytest.raises(TypeError, match="full_kv_num_blocks: expected an integer"):
        BlockMask.from_kv_blocks(np.ones((1, 1, 1), np.int32), np.zeros((1, 1, 1, 1), np.int32),
                                 np.ones((1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.int32))


def test_separate_full_blocks_false_lists_every_tile_as_partial():
    """torch's create_block_mask(separate_full_blocks=False) (also through flexattn.torch.enable()): every
    non-empty tile in kv_*, full_* None; the attention result is the same."""
    split = create_block_mask(sliding, 2, 1, 300, 300, BLOCK_SIZE=64)
    merged = create_block_mask(sliding, 2, 1, 300, 300, BLOCK_SIZE=64, separate_full_blocks=False,
                               compute_dq_write_order=False, dq_kv_order=True)
    assert merged.full_kv_num_blocks is None and merged.full_q_num_blocks is None
    both = (_block_layout.ordered_to_dense(split._np("kv_num_blocks"), split._np("kv_indices"))
            | _block_layout.ordered_to_dense(split._np("full_kv_num_blocks"), split._np("full_kv_indices")))
    np.testing.assert_array_equal(_block_layout.ordered_to_dense(merged._np("kv_num_blocks"),
                                                                 merged._np("kv_indices")), both)
    np.testing.assert_array_equal(_block_layout.ordered_to_dense(merged._np("q_num_blocks"), merged._np("q_indices")),
                                  np.swapaxes(both, -2, -1))
    q, k, v = (np.random.default_rng(1).standard_normal((2, 1, 300, 16)) for _ in range(3))
    np.testing.assert_allclose(flexattn.flex_attention(q, k, v, block_mask=merged),
                               flexattn.flex_attention(q, k, v, block_mask=split), rtol=0, atol=1e-12)


def test_compact_kv_index_lists_are_widened_to_a_column_per_kv_block():
    """torch's from_kv_blocks takes [rows, MAX_BLOCKS_IN_COL] lists narrower than the kv blocks of seq_lengths;
    flexattn refused them ("kv_indices must be in [0, 2)") and sized the q side from their width."""
    num = np.array([[[1, 2, 2, 2]]], np.int32)
    idx = np.array([[[[0, 0], [0, 1], [1, 2], [2, 3]]]], np.int32)  # a band: each row's 2 tiles, width 2 of 4
    bm = BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=32, seq_lengths=(128, 128))
    assert bm.kv_indices.shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(bm.kv_indices[..., :2], idx)
    np.testing.assert_array_equal(bm.q_num_blocks, [[[2, 2, 2, 1]]])
    assert bm._adjust(200, 200).q_num_blocks.shape == (1, 1, 7)  # the q side follows the new kv blocks
    band = lambda b, h, q, kv: (q // 32 - kv // 32 <= 1) & (kv <= q)
    bm.mask_mod = band
    wide = BlockMask.from_kv_blocks(num, np.concatenate([idx, np.zeros_like(idx)], -1), BLOCK_SIZE=32,
                                    seq_lengths=(128, 128), mask_mod=band)
    q, k, v = (np.random.default_rng(2).standard_normal((1, 2, 128, 16)) for _ in range(3))
    np.testing.assert_allclose(flexattn.flex_attention(q, k, v, block_mask=bm),
                               flexattn.flex_attention(q, k, v, block_mask=wide), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"kv_indices must be in \[0, 4\)"):
        BlockMask.from_kv_blocks(num, idx + 3, BLOCK_SIZE=32, seq_lengths=(128, 128))
