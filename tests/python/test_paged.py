"""flexattn.paged: the native page bookkeeping (PageAllocator; no torch needed) and paged_attention's CPU
path (torch CPU tensors) against a dense float64 reference written from the decode definition
(include/flexattn/decode.h): query row i of sequence b at logical position q_offsets[b] + i, kv row j at
logical position j, kv positions >= kv_lens[b] masked, the mods and the block mask on logical positions."""
import math

import numpy as np
import pytest

from flexattn import _native

pytestmark = pytest.mark.skipif(_native.load() is None, reason="needs the compiled extension flexattn._C")

try:
    import torch
except ImportError:  # CI without torch: the allocator tests still run
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="paged_attention takes torch tensors; torch not installed")


def test_append_reserve_erase_and_the_page_table():
    from flexattn.paged import PageAllocator

    a = PageAllocator(num_pages=8, page_size=16, max_batch=2, max_pages_per_seq=4)
    assert a.append(0, 17) == 0
    assert a.append(1, 1) == 0
    assert a.length(0) == 17 and a.capacity(0) == 32 and a.free_pages == 5
    table = a.page_table()
    assert len(table) == 2 * 4
    assert table[:3] == [0, 1, -1] and table[4] == 2
    assert a.lengths() == [17, 1]
    assert a.physical_page(0, 20) == 1
    a.erase(0)
    assert a.free_pages == 7 and a.lengths() == [0, 1] and a.page_table()[0] == -1
    arr = a.page_table_array()  # one copy of the native table, shaped
    assert arr.dtype == np.int32 and arr.shape == (2, 4) and arr.ravel().tolist() == a.page_table()
    arr[0, 0] = 5  # a copy: the allocator's table is unchanged
    assert a.page_table()[0] == -1 and arr.flags.writeable


def test_errors_are_value_errors():
    from flexattn.paged import PageAllocator

    with pytest.raises(ValueError, match="page_size: expected 1..256"):
        PageAllocator(4, 300, 1, 1)
    a = PageAllocator(2, 4, 1, 8)
    with pytest.raises(ValueError, match="only 2 are free"):
        a.reserve(0, 12)


def test_page_allocator_is_a_type_with_named_argument_errors():
    """PageAllocator was a factory function: isinstance(a, PageAllocator) raised TypeError and it could not be
    subclassed; a float length got nanobind's signature dump instead of an error naming the argument."""
    from flexattn.paged import PageAllocator

    a = PageAllocator(4, 16, 2, 2)
    assert isinstance(a, PageAllocator)

    class Tracked(PageAllocator):
        pass

    assert Tracked(2, 4, 1, 2).append(0, np.int64(3)) == 0  # numpy integers are ints
    with pytest.raises(TypeError, match="length: expected an int, got float"):
        a.reserve(0, 5.0)
    with pytest.raises(TypeError, match="tokens: expected an int, got bool"):
        a.append(0, True)
    with pytest.raises(TypeError, match="page_size: expected an int, got str"):
        PageAllocator(4, "16", 1, 1)
    # beyond int64: nanobind's TypeError listed the signature instead of naming the argument
    with pytest.raises(ValueError, match=r"length: expected an int in \[-2\^63, 2\^63\), got 9223372036854775808"):
        a.reserve(0, 2**63)
    with pytest.raises(ValueError, match="seq: expected an int in"):
        a.erase(-2**63 - 1)
    assert repr(a) == "PageAllocator(num_pages=4, page_size=16, max_batch=2, max_pages_per_seq=2; 4 pages free)"
    assert a.free_pages == 4 and a.page_size == 16 and a.max_batch == 2 and a.max_pages_per_seq == 2


def test_page_allocator_huge_sizes_fail_by_name_and_change_nothing():
    """Sizes near 2^63 wrapped in the native rounding: reserve(0, 2**63 - 1) returned with nothing mapped, append
    blamed a 'length' argument, and constructor sizes whose product wrapped raised MemoryError."""
    from flexattn.paged import PageAllocator

    a = PageAllocator(8, 16, 1, 4)
    a.append(0, 5)
    with pytest.raises(ValueError, match="reserve: sequence 0 needs .* pages, more than max_pages_per_seq"):
        a.reserve(0, 2**63 - 1)
    with pytest.raises(ValueError, match=r"append: sequence 0 holds 5 tokens; \d+ more exceed"):
        a.append(0, 2**63 - 1)
    assert a.length(0) == 5 and a.capacity(0) == 16 and a.free_pages == 7
    with pytest.raises(ValueError, match="max_pages_per_seq: expected 1.. with max_pages_per_seq \\* page_size"):
        PageAllocator(8, 256, 1, 2**56)
    with pytest.raises(ValueError, match="max_batch: expected 1.. with max_batch \\* max_pages_per_seq"):
        PageAllocator(4, 16, 2**62, 4)


# ---- the reference, from the definition ---------------------------------------------------------------------
def reference(q, k_rows, v_rows, q_offsets, score=None, mask=None, scale=None):
    """q [B, Hq, L, D]; k_rows[b] / v_rows[b]: [Hkv, n_b, D] numpy float64, the sequence's valid kv rows in
    logical order. score(s, b, h, qp, kv) / mask(b, h, qp, kv) take numpy kv position vectors."""
    B, Hq, L, D = q.shape
    Dv = v_rows[0].shape[-1]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    out, lse = np.zeros((B, Hq, L, Dv)), np.full((B, Hq, L), -np.inf)
    for b in range(B):
        Hkv, n = k_rows[b].shape[:2]
        kv = np.arange(n)
        for h in range(Hq):
            hk = h // (Hq // Hkv)
            for i in range(L):
                qp = int(q_offsets[b]) + i
                s = k_rows[b][hk] @ q[b, h, i] * scale
                if score is not None:
                    s = score(s, b, h, qp, kv)
                keep = np.ones(n, bool) if mask is None else np.broadcast_to(mask(b, h, qp, kv), (n,))
                if not keep.any():
                    continue
                s = np.where(keep, s, -np.inf)
                m = s.max()
                p = np.exp(s - m)
                out[b, h, i] = p @ v_rows[b][hk] / p.sum()
                lse[b, h, i] = m + np.log(p.sum())
    return out, lse


def rows_of_contiguous(cache, lens):
    return [cache[b if cache.shape[0] > 1 else 0, :, :n].astype(np.float64) for b, n in enumerate(lens)]


def rows_of_pages(pool, table, lens, page_size):
    """Logical rows of each sequence read through the page table (page_table[b][j // ps], row j % ps)."""
    return [np.stack([pool[table[b][j // page_size], :, j % page_size] for j in range(n)], axis=1).astype(np.float64)
            if n else np.zeros((pool.shape[1], 0, pool.shape[3])) for b, n in enumerate(lens)]


def random_pages(rng, B, Hkv, page_size, max_pages, lens, D, Dv, dtype):
    """A pool with every sequence's pages scattered over it (shuffled ids, -1 past each length)."""
    used = [(n + page_size - 1) // page_size for n in lens]
    num_pages = sum(used) + 3  # a few pages that no sequence owns
    ids = rng.permutation(num_pages)
    table = np.full((B, max_pages), -1, np.int32)
    at = 0
    for b, u in enumerate(used):
        table[b, :u] = ids[at:at + u]
        at += u
    k = torch.from_numpy(rng.standard_normal((num_pages, Hkv, page_size, D))).to(dtype)
    v = torch.from_numpy(rng.standard_normal((num_pages, Hkv, page_size, Dv))).to(dtype)
    return k, v, table


def i32(x):
    return torch.tensor(np.asarray(x), dtype=torch.int32)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


WINDOW = 8


def sliding(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def np_causal(b, h, qp, kv):
    return qp >= kv


def np_sliding(b, h, qp, kv):
    return (qp >= kv) & (qp - kv < WINDOW)


def check(out, lse, ref_out, ref_lse, tol=1e-9):
    out, lse = out.double().numpy(), lse.double().numpy()
    assert np.array_equal(np.isinf(lse), np.isinf(ref_lse))
    finite = np.isfinite(ref_lse)
    assert np.abs(lse[finite] - ref_lse[finite]).max(initial=0) <= tol
    assert np.abs(out - ref_out).max() <= tol * max(1.0, np.abs(ref_out).max())


# ---- the CPU path against the reference ---------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("groups", [1, 4, 8])
def test_contiguous_per_sequence_lengths_offsets_and_causal(groups):
    from flexattn import create_block_mask, paged_attention

    rng = np.random.default_rng(groups)
    B, Hkv, L, D, S = 3, 2, 5, 24, 37
    Hq = Hkv * groups
    lens, offs = [37, 0, 19], [32, 0, 14]  # the last query row of each sequence sits at its last kv row
    q = torch.from_numpy(rng.standard_normal((B, Hq, L, D)))
    k = torch.from_numpy(rng.standard_normal((B, Hkv, S, D)))
    v = torch.from_numpy(rng.standard_normal((B, Hkv, S, D)))
    mask = create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)
    out, lse = paged_attention(q, k, v, kv_lens=i32(lens), q_offsets=i32(offs), block_mask=mask, return_lse=True)
    ref = reference(q.numpy(), rows_of_contiguous(k.numpy(), lens), rows_of_contiguous(v.numpy(), lens), offs,
                    mask=np_causal)
    check(out, lse, *ref)
    assert out.shape == (B, Hq, L, D) and out.dtype == torch.float64
    assert torch.all(out[1] == 0) and torch.all(torch.isneginf(lse[1]))  # the empty sequence


@needs_torch
@pytest.mark.parametrize("page_size", [1, 16, 128])
def test_paged_odd_lengths_sliding_window(page_size):
    from flexattn import create_block_mask, paged_attention

    rng = np.random.default_rng(page_size)
    B, Hq, Hkv, L, D, Dv = 4, 8, 2, 3, 16, 40
    lens = [1, 131, 0, 70]
    max_pages = (max(lens) + page_size - 1) // page_size + 1
    offs = [max(n - L, 0) for n in lens]
    k, v, table = random_pages(rng, B, Hkv, page_size, max_pages, lens, D, Dv, torch.float64)
    q = torch.from_numpy(rng.standard_normal((B, Hq, L, D)))
    cap = max_pages * page_size
    mask = create_block_mask(sliding, 1, 1, cap, cap, device="cpu", BLOCK_SIZE=64)
    out, lse = paged_attention(q, k, v, i32(table), i32(lens), q_offsets=i32(offs), block_mask=mask,
                               return_lse=True)
    ref = reference(q.numpy(), rows_of_pages(k.numpy(), table, lens, page_size),
                    rows_of_pages(v.numpy(), table, lens, page_size), offs, mask=np_sliding)
    check(out, lse, *ref)
    assert out.shape == (B, Hq, L, Dv)


CAP = 4.0


def softcap(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


@needs_torch
@pytest.mark.parametrize("page_size", [1, 16, 128])
def test_softcap_and_a_bias_indexed_by_kv_position(page_size):
    from flexattn import paged_attention

    rng = np.random.default_rng(7 + page_size)
    B, Hq, Hkv, L, D = 2, 4, 4, 1, 32
    lens = [45, 200]
    max_pages = (max(lens) + page_size - 1) // page_size
    k, v, table = random_pages(rng, B, Hkv, page_size, max_pages, lens, D, D, torch.float64)
    q = torch.from_numpy(rng.standard_normal((B, Hq, L, D)))
    bias = torch.from_numpy(rng.standard_normal(max_pages * page_size)).float()  # captured buffers are f32

    def with_bias(score, b, h, q_idx, kv_idx):
        return softcap(score, b, h, q_idx, kv_idx) + bias[kv_idx]

    offs = [n - 1 for n in lens]
    out, lse = paged_attention(q, k, v, i32(table), i32(lens), q_offsets=i32(offs), score_mod=with_bias,
                               scale=0.3, return_lse=True)
    bias_np = bias.double().numpy()
    ref = reference(q.numpy(), rows_of_pages(k.numpy(), table, lens, page_size),
                    rows_of_pages(v.numpy(), table, lens, page_size), offs,
                    score=lambda s, b, h, qp, kv: CAP * np.tanh(s / CAP) + bias_np[kv], scale=0.3)
    check(out, lse, *ref)


@needs_torch
def test_score_mod_sees_logical_query_positions():
    from flexattn import paged_attention

    rng = np.random.default_rng(3)
    B, H, L, D, S = 2, 2, 4, 16, 50
    q, k, v = (torch.from_numpy(rng.standard_normal(s)) for s in ((B, H, L, D), (1, H, S, D), (1, H, S, D)))

    def distance(score, b, h, q_idx, kv_idx):  # ALiBi-like: depends on q_idx - kv_idx
        return score - 0.1 * (q_idx - kv_idx)

    offs, lens = [10, 46], [14, 50]
    out, lse = paged_attention(q, k, v, None, i32(lens), q_offsets=i32(offs), score_mod=distance, block_mask=None,
                               return_lse=True)
    ref = reference(q.numpy(), rows_of_contiguous(k.numpy(), lens), rows_of_contiguous(v.numpy(), lens), offs,
                    score=lambda s, b, h, qp, kv: s - 0.1 * (qp - kv))
    check(out, lse, *ref)


@needs_torch
def test_defaults_are_the_capacity_and_offset_zero():
    from flexattn import flex_attention, paged_attention

    rng = np.random.default_rng(4)
    q, k, v = (torch.from_numpy(rng.standard_normal(s)) for s in ((2, 4, 7, 16), (2, 2, 33, 16), (2, 2, 33, 8)))
    out = paged_attention(q, k, v)
    assert torch.allclose(out, flex_attention(q, k, v, enable_gqa=True), atol=1e-12)
    # paged with kv_lens None: every page of the table is attended
    table = i32([[1, 0], [3, 2]])
    pool_k = torch.from_numpy(rng.standard_normal((4, 2, 16, 16)))
    pool_v = torch.from_numpy(rng.standard_normal((4, 2, 16, 8)))
    out = paged_attention(q, pool_k, pool_v, table)
    ref = reference(q.numpy(), rows_of_pages(pool_k.numpy(), table.numpy(), [32, 32], 16),
                    rows_of_pages(pool_v.numpy(), table.numpy(), [32, 32], 16), [0, 0])[0]
    assert np.abs(out.numpy() - ref).max() < 1e-9


def per_head_prefix(b, h, q_idx, kv_idx):  # a prefix of whole kv tiles (full tiles) + a short window
    return (kv_idx < 32 * (h + b)) | ((q_idx >= kv_idx) & (q_idx - kv_idx < 6))


@needs_torch
def test_block_mask_per_head_and_per_batch_with_full_tiles():
    from flexattn import create_block_mask, paged_attention

    rng = np.random.default_rng(5)
    B, H, L, D, S = 2, 3, 2, 16, 96
    q, k, v = (torch.from_numpy(rng.standard_normal(s)) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D)))
    mask = create_block_mask(per_head_prefix, B, H, S, S, device="cpu", BLOCK_SIZE=(16, 32))
    assert mask.full_kv_num_blocks is not None and int(np.asarray(mask.full_kv_num_blocks).sum()) > 0
    lens, offs = [96, 61], [94, 59]
    out, lse = paged_attention(q, k, v, None, i32(lens), q_offsets=i32(offs), block_mask=mask, return_lse=True)
    ref = reference(q.numpy(), rows_of_contiguous(k.numpy(), lens), rows_of_contiguous(v.numpy(), lens), offs,
                    mask=lambda b, h, qp, kv: (kv < 32 * (h + b)) | ((qp >= kv) & (qp - kv < 6)))
    check(out, lse, *ref)


@needs_torch
def test_torch_block_mask_and_low_precision():
    from torch.nn.attention.flex_attention import create_block_mask as torch_create_block_mask

    from flexattn import paged_attention

    rng = np.random.default_rng(6)
    B, H, L, D, S, ps = 2, 2, 3, 32, 128, 16
    lens, offs = [100, 128], [97, 125]
    k, v, table = random_pages(rng, B, H, ps, S // ps, lens, D, D, torch.bfloat16)
    q = torch.from_numpy(rng.standard_normal((B, H, L, D))).to(torch.bfloat16)
    mask = torch_create_block_mask(causal, 1, 1, S, S, device="cpu", BLOCK_SIZE=64)
    out, lse = paged_attention(q, k, v, i32(table), i32(lens), q_offsets=i32(offs), block_mask=mask,
                               return_lse=True)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    ref_out, ref_lse = reference(q.double().numpy(), rows_of_pages(k.double().numpy(), table, lens, ps),
                                 rows_of_pages(v.double().numpy(), table, lens, ps), offs, mask=np_causal)
    assert np.abs(out.double().numpy() - ref_out).max() <= 1e-2
    assert np.abs(lse.double().numpy() - ref_lse).max() <= 1e-5


@needs_torch
def test_without_validation_offsets_are_clamped_as_the_kernels_do():
    """validate=False lets any q_offsets through; the kernels clamp them into [0, 2^30 - L]. The CPU path used a
    negative one as it was: a block mask's row -1 (Python indexing: the last row) and positions below 0."""
    from flexattn import create_block_mask, paged_attention

    rng = np.random.default_rng(9)
    q = torch.from_numpy(rng.standard_normal((1, 2, 1, 16)))
    k, v = (torch.from_numpy(rng.standard_normal((1, 2, 300, 16))) for _ in range(2))
    mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, 1, 1, 300, 300, device="cpu")

    def tilt(score, b, h, q_idx, kv_idx):
        return score + 0.01 * q_idx

    want = paged_attention(q, k, v, None, i32([300]), q_offsets=i32([0]), block_mask=mask, score_mod=tilt)
    got = paged_attention(q, k, v, None, i32([300]), q_offsets=i32([-5]), block_mask=mask, score_mod=tilt,
                          validate=False)
    assert torch.equal(got, want)
    top = (1 << 30) - 1  # L = 1: the kernels' clamp, one past the validated range
    want = paged_attention(q, k, v, None, i32([300]), q_offsets=i32([top]), score_mod=tilt, validate=False)
    got = paged_attention(q, k, v, None, i32([300]), q_offsets=i32([2**31 - 1]), score_mod=tilt, validate=False)
    assert torch.equal(got, want)


@needs_torch
def test_without_validation_a_bad_page_is_masked():
    from flexattn import paged_attention

    rng = np.random.default_rng(8)
    q = torch.from_numpy(rng.standard_normal((1, 2, 1, 16)))
    pool = torch.from_numpy(rng.standard_normal((2, 2, 4, 16)))
    # Page 7 and page -1 are not in the pool: their positions (4..7 and 0..3) attend nothing, as torch's
    # PagedAttention masks unmapped pages; the kernels do the same.
    table = i32([[1, 7]])
    out, lse = paged_attention(q, pool, pool, table, i32([8]), validate=False, return_lse=True)
    rows = [pool.numpy()[1]]
    check(out, lse, *reference(q.numpy(), rows, rows, [0]))
    out, lse = paged_attention(q, pool, pool, i32([[-1, 0]]), i32([8]), validate=False, return_lse=True)
    rows = [pool.numpy()[0]]
    ref_out, ref_lse = reference(q.numpy(), rows, rows, [0])
    check(out, lse, ref_out, ref_lse)


@needs_torch
def test_page_allocator_end_to_end():
    """Prompts of different lengths, then decode steps: append a token, write its K/V rows where
    physical_page says, attend with the allocator's page table and lengths; a sequence is erased and its
    slot reused. Compared with the reference on the logically stored rows after every step."""
    from flexattn import create_block_mask, paged_attention
    from flexattn.paged import PageAllocator

    rng = np.random.default_rng(9)
    B, Hq, Hkv, D, ps, max_pages = 3, 4, 2, 16, 4, 8
    alloc = PageAllocator(num_pages=16, page_size=ps, max_batch=B, max_pages_per_seq=max_pages)
    k_pool = torch.zeros(16, Hkv, ps, D, dtype=torch.float64)
    v_pool = torch.zeros(16, Hkv, ps, D, dtype=torch.float64)
    logical_k = [np.zeros((Hkv, 0, D)) for _ in range(B)]
    logical_v = [np.zeros((Hkv, 0, D)) for _ in range(B)]
    cap = max_pages * ps
    mask = create_block_mask(causal, 1, 1, cap, cap, device="cpu", BLOCK_SIZE=8)

    def write(seq, n):
        first = alloc.append(seq, n)
        kn, vn = rng.standard_normal((Hkv, n, D)), rng.standard_normal((Hkv, n, D))
        for t in range(n):
            pos = first + t
            page = alloc.physical_page(seq, pos)
            k_pool[page, :, pos % ps] = torch.from_numpy(kn[:, t])
            v_pool[page, :, pos % ps] = torch.from_numpy(vn[:, t])
        logical_k[seq] = np.concatenate([logical_k[seq], kn], axis=1)
        logical_v[seq] = np.concatenate([logical_v[seq], vn], axis=1)

    for seq, prompt in enumerate([5, 1, 12]):
        write(seq, prompt)
    for step in range(6):
        if step == 3:  # sequence 1 finishes; a new one takes its slot
            alloc.erase(1)
            logical_k[1], logical_v[1] = np.zeros((Hkv, 0, D)), np.zeros((Hkv, 0, D))
            write(1, 3)
        for seq in range(B):
            write(seq, 1)
        lens = alloc.lengths()
        table = torch.tensor(alloc.page_table(), dtype=torch.int32).view(B, max_pages)
        offs = [n - 1 for n in lens]
        q = torch.from_numpy(rng.standard_normal((B, Hq, 1, D)))
        out, lse = paged_attention(q, k_pool, v_pool, table, i32(lens), q_offsets=i32(offs), block_mask=mask,
                                   return_lse=True)
        check(out, lse, *reference(q.numpy(), logical_k, logical_v, offs, mask=np_causal))


# ---- errors, each naming its argument -----------------------------------------------------------------------
def _args(**over):
    """Valid arguments of a paged call (B=2, Hq=4, Hkv=2, L=3, D=16, 4 pages of 8), with overrides."""
    a = dict(query=torch.zeros(2, 4, 3, 16), key_cache=torch.zeros(4, 2, 8, 16), value_cache=torch.zeros(4, 2, 8, 16),
             page_table=i32([[0, 1], [2, 3]]), kv_lens=i32([16, 5]))
    a.update(over)
    return a


def _raises(exc, match, **over):
    from flexattn import paged_attention

    a = _args(**over)
    with pytest.raises(exc, match=match):
        paged_attention(a.pop("query"), a.pop("key_cache"), a.pop("value_cache"), a.pop("page_table"),
                        a.pop("kv_lens"), **a)


@needs_torch
def test_the_valid_arguments_of_the_error_tests_run():
    from flexattn import paged_attention

    a = _args()
    out = paged_attention(a["query"], a["key_cache"], a["value_cache"], a["page_table"], a["kv_lens"])
    assert out.shape == (2, 4, 3, 16)


_ARG_ERRORS = [
    (dict(query=np.zeros((2, 4, 3, 16))), TypeError, "query must be a torch tensor"),
    (dict(value_cache=[0.0]), TypeError, "value_cache must be a torch tensor"),
    (dict(query="zeros(2, 4, 16)"), ValueError, r"query: expected a 4-D tensor \[B, Hq, L, D\]"),
    (dict(key_cache="zeros(4, 2, 8)"), ValueError, "key_cache: expected a 4-D tensor"),
    (dict(value_cache="zeros(4, 2, 8, 16, 1)"), ValueError, "value_cache: expected a 4-D tensor"),
    (dict(query="zeros(2, 4, 3, 16, dtype=torch.int32)"), ValueError, "query: expected float16, bfloat16"),
    (dict(key_cache="zeros(4, 2, 8, 16, dtype=torch.float64)"), ValueError, "key_cache: expected query's dtype"),
    (dict(value_cache="zeros(4, 2, 8, 16, dtype=torch.float16)"), ValueError, "value_cache: expected query's dtype"),
    (dict(key_cache="zeros(4, 2, 8, 16, device='meta')"), ValueError, "key_cache: expected a tensor on query's device"),
    (dict(value_cache="zeros(4, 2, 8, 16, device='meta')"), ValueError, "value_cache: expected a tensor on query's"),
    (dict(query="zeros(0, 4, 3, 16)"), ValueError, "query: every dimension must be at least 1"),
    (dict(query="zeros(2, 4, 65, 16)"), ValueError, "query: takes 1..64 query rows per sequence .* got L=65"),
    (dict(query="zeros(2, 4, 0, 16)"), ValueError, "query: takes 1..64 query rows .* got L=0"),
    (dict(key_cache="zeros(4, 0, 8, 16)"), ValueError, "key_cache: every dimension must be at least 1"),
    (dict(value_cache="zeros(4, 2, 8, 0)"), ValueError, "value_cache: every dimension must be at least 1"),
    (dict(key_cache="zeros(4, 2, 8, 32)"), ValueError, "key_cache: head dim .* must equal query's D=16, got 32"),
    (dict(value_cache="zeros(4, 2, 4, 16)"), ValueError, r"value_cache: dims 0..2 must equal key_cache's \(4, 2, 8\)"),
    (dict(enable_gqa=False), ValueError, "key_cache: query and key/value must have the same number of heads"),
    (dict(key_cache="zeros(4, 3, 8, 16)", value_cache="zeros(4, 3, 8, 16)"), ValueError,
     r"key_cache: the query heads \(Hq=4\) must be a multiple of the kv heads \(Hkv=3"),
    (dict(key_cache="zeros(1, 2, 257, 16)", value_cache="zeros(1, 2, 257, 16)"), ValueError,
     "key_cache: page size .* must be 1..256, got 257"),
    (dict(page_table=[[0, 1], [2, 3]]), TypeError, "page_table must be an int32 torch tensor"),
    (dict(page_table="tensor([[0, 1], [2, 3]])"), ValueError,
     "page_table: expected dtype torch.int32, got torch.int64"),
    (dict(page_table="zeros(2, 2, dtype=torch.int32, device='meta')"), ValueError,
     "page_table: expected a tensor on query's device"),
    (dict(page_table="zeros(4, dtype=torch.int32)"), ValueError, "page_table: expected a 2-D tensor"),
    (dict(page_table="zeros(3, 2, dtype=torch.int32)"), ValueError, r"page_table: expected shape \[B=2, max_pages"),
    (dict(page_table=None, key_cache="zeros(3, 2, 8, 16)", value_cache="zeros(3, 2, 8, 16)"), ValueError,
     r"key_cache: batch \(dim 0\) must be 1 or query's B=2, got 3"),
    (dict(page_table=None, kv_lens=None, key_cache="zeros(1, 2, 1, 16).expand(1, 2, 2**31, 16)",
          value_cache="zeros(1, 2, 1, 16).expand(1, 2, 2**31, 16)"), ValueError, "key_cache: a capacity of"),
    (dict(kv_lens="tensor([16, 5])"), ValueError, "kv_lens: expected dtype torch.int32"),
    (dict(kv_lens="zeros(3, dtype=torch.int32)"), ValueError, r"kv_lens: expected shape \[B=2\]"),
    (dict(kv_lens="zeros(2, 1, dtype=torch.int32)"), ValueError, "kv_lens: expected a 1-D tensor"),
    (dict(q_offsets="zeros(1, dtype=torch.int32)"), ValueError, r"q_offsets: expected shape \[B=2\]"),
    (dict(q_offsets="zeros(2, dtype=torch.int32, device='meta')"), ValueError,
     "q_offsets: expected a tensor on query's device"),
    (dict(scale="0.5"), TypeError, "scale must be a number or None"),
    (dict(score_mod=causal), TypeError, r"score_mod must take \(score, b, h, q_idx, kv_idx\), got a mask_mod"),
    (dict(kv_lens="tensor([17, 5], dtype=torch.int32)"), ValueError,
     r"kv_lens: kv_lens\[0\] = 17 is outside \[0, 16\]"),
    (dict(kv_lens="tensor([16, -1], dtype=torch.int32)"), ValueError, r"kv_lens: kv_lens\[1\] = -1 is outside"),
    (dict(q_offsets="tensor([0, -2], dtype=torch.int32)"), ValueError, r"q_offsets: q_offsets\[1\] = -2 is outside"),
    (dict(q_offsets="tensor([2**30 - 3, 0], dtype=torch.int32)"), ValueError, r"q_offsets: q_offsets\[0\] = "),
    (dict(page_table="tensor([[0, 1], [4, 3]], dtype=torch.int32)"), ValueError,
     r"page_table: page_table\[1, 0\] = 4 is not a page of the pool \(num_pages=4\) .* kv_lens\[1\] = 5"),
    (dict(page_table="tensor([[0, -1], [2, 3]], dtype=torch.int32)"), ValueError, r"page_table\[0, 1\] = -1"),
    (dict(kv_lens=None, page_table="tensor([[0, 1], [2, -1]], dtype=torch.int32)"), ValueError,
     r"page_table\[1, 1\] = -1 .* kv_lens\[1\] = 16"),
]


def _evaluated(over):
    return {n: eval(v, {"torch": torch, "zeros": torch.zeros, "tensor": torch.tensor}) if isinstance(v, str) and
            n != "scale" else v for n, v in over.items()}


@needs_torch
@pytest.mark.parametrize("over, exc, match", _ARG_ERRORS)
def test_errors_name_the_argument(over, exc, match):
    _raises(exc, match, **_evaluated(over))


# The checks that read the int32 arrays' values (kv_lens / q_offsets ranges, page ids) are what validate=False
# skips; every other argument error is raised the same way without validation.
_VALUE_ERRORS = ("is outside", "is not a page", r"page_table\[", r"q_offsets\[", r"kv_lens\[")


@needs_torch
@pytest.mark.parametrize("over, exc, match", [e for e in _ARG_ERRORS if not any(v in e[2] for v in _VALUE_ERRORS)])
def test_argument_errors_do_not_depend_on_validate(over, exc, match):
    _raises(exc, match, validate=False, **_evaluated(over))


@needs_torch
def test_block_mask_errors():
    from flexattn import create_block_mask
    from flexattn.block_mask import BlockMask
    from flexattn.masks import noop_mask

    _raises(ValueError, "block_mask: batch must be 1 or B=2, got 3",
            block_mask=create_block_mask(causal, 3, 1, 16, 16, device="cpu", BLOCK_SIZE=8))
    _raises(ValueError, "block_mask: heads must be 1 or Hq=4, got 2",
            block_mask=create_block_mask(causal, 1, 2, 16, 16, device="cpu", BLOCK_SIZE=8))
    meta = BlockMask((16, 16), torch.zeros(1, 1, 2, dtype=torch.int32, device="meta"),
                     torch.zeros(1, 1, 2, 2, dtype=torch.int32, device="meta"), None, None, None, None, None, None,
                     8, noop_mask)
    _raises(ValueError, "block_mask: expected its tensors on query's device", block_mask=meta)
    _raises(ValueError, r"block_mask: built for Q_LEN=16, but query row 2 of sequence 1 sits at logical position 16",
            block_mask=create_block_mask(causal, 1, 1, 16, 16, device="cpu", BLOCK_SIZE=8),
            q_offsets=i32([0, 14]))
    _raises(ValueError, r"block_mask: built for KV_LEN=8, but kv_lens\[0\] = 16",
            block_mask=create_block_mask(causal, 1, 1, 16, 8, device="cpu", BLOCK_SIZE=8))


@needs_torch
def test_no_backward():
    _raises(NotImplementedError, "paged_attention: there is no backward",
            query=torch.zeros(2, 4, 3, 16, requires_grad=True))


@needs_torch
def test_hand_built_block_mask_full_tiles_skip_the_mask_mod():
    """torch's block semantics on logical positions: a full tile attends everywhere (mask_mod skipped), a
    partial tile asks mask_mod, a tile in no list attends nothing."""
    from flexattn import paged_attention
    from flexattn.block_mask import BlockMask

    rng = np.random.default_rng(10)
    B, H, L, D, S, blk = 1, 2, 3, 16, 64, 16
    q, k, v = (torch.from_numpy(rng.standard_normal(s)) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D)))
    # query block 2 (positions 32..47): kv tile 2 partial (causal), tile 0 full, tile 1 and 3 absent
    num = torch.zeros(1, 1, 4, dtype=torch.int32)
    idx = torch.zeros(1, 1, 4, 4, dtype=torch.int32)
    fnum, fidx = num.clone(), idx.clone()
    num[0, 0, 2], idx[0, 0, 2, 0] = 1, 2
    fnum[0, 0, 2], fidx[0, 0, 2, 0] = 1, 0
    mask = BlockMask.from_kv_blocks(num, idx, fnum, fidx, BLOCK_SIZE=blk, mask_mod=causal, seq_lengths=(S, S))
    offs, lens = [33], [50]
    out, lse = paged_attention(q, k, v, None, i32(lens), q_offsets=i32(offs), block_mask=mask, return_lse=True)
    tile_of = (lambda kv: kv // blk)
    ref = reference(q.numpy(), rows_of_contiguous(k.numpy(), lens), rows_of_contiguous(v.numpy(), lens), offs,
                    mask=lambda b, h, qp, kv: (tile_of(kv) == 0) | ((tile_of(kv) == 2) & (qp >= kv)))
    check(out, lse, *ref)


@needs_torch
def test_cuda_path_arguments_reach_the_native_checks(monkeypatch):
    """Without a GPU the CUDA path cannot run, but its binding call can: CPU bf16 tensors are handed to
    _C.cuda_decode_workspace_bytes (views, bound mods, block mask, page table), whose own validation
    rejects a kv BLOCK_SIZE the decode kernels cannot walk before any device is touched. Without a usable
    driver the well-formed call stops at the driver instead (a ValueError, never a TypeError)."""
    import contextlib

    from flexattn import create_block_mask, paged

    class Stream:
        cuda_stream = 0

    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d=None: Stream())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(paged, "_cuda_now", lambda torch, index: (0, 0))  # (current device, raw stream)
    q = torch.zeros(2, 8, 1, 80, dtype=torch.bfloat16)  # D=80: zero-padded to the kernels' 96
    pool = torch.zeros(6, 2, 16, 80, dtype=torch.bfloat16)
    table, lens = i32([[0, 1], [2, 3]]), i32([20, 5])
    bias = torch.zeros(32)

    def with_bias(score, b, h, q_idx, kv_idx):
        return softcap(score, b, h, q_idx, kv_idx) + bias[kv_idx]

    mask = create_block_mask(causal, 1, 1, 32, 32, device="cpu", BLOCK_SIZE=16)
    call = paged._Call(torch, q, pool, pool, table, lens, lens - 1, mask, True)
    with pytest.raises(ValueError, match="block_mask: the decode kernels need a kv BLOCK_SIZE that is a multiple"):
        paged._cuda_decode(torch, call, with_bias, mask, 0.125)
    if not _native.load().cuda_available()[0]:
        call = paged._Call(torch, q, pool, pool, table, lens, lens - 1, None, True)
        with pytest.raises(ValueError):
            paged._cuda_decode(torch, call, with_bias, None, 0.125)


@needs_torch
def test_cuda_path_asks_the_workspace_size_once_per_shape(monkeypatch):
    """The per-token host path: the split workspace size depends on shapes and the device only, so
    _cuda_decode asks the native side once per (variant, shapes, device) and reuses it; every call still
    enqueues with that size, a new shape asks again, and the noop-mask binding is the traced one. Native
    calls are stubbed (no GPU here): what is checked is what reaches them."""
    import contextlib

    from flexattn import _torch_api, _torch_ops, paged

    class Stream:
        cuda_stream = 0

    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d=None: Stream())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(paged, "_cuda_now", lambda torch, index: (0, 0))  # (current device, raw stream)
    real = _native.require("test")
    calls = {"size": 0, "run": []}

    class Native:
        def __getattr__(self, name):
            return getattr(real, name)

        def cuda_decode_workspace_bytes(self, *views, **kw):
            calls["size"] += 1
            return 4096 * views[1][2][0]  # grows with B: a new shape must ask again

        def cuda_decode(self, *views, workspace, workspace_bytes, **kw):
            calls["run"].append((list(views[1][2]), workspace_bytes, workspace != 0, kw["page_table"] != 0))

    monkeypatch.setattr(paged._native, "require", lambda what="": Native())
    monkeypatch.setattr(paged, "_WS_BYTES", {})
    pool = torch.zeros(8, 2, 16, 64, dtype=torch.bfloat16)
    for B in (2, 2, 2, 3):
        q = torch.zeros(B, 4, 1, 64, dtype=torch.bfloat16)
        table = torch.arange(B * 2, dtype=torch.int32).view(B, 2)
        lens = torch.full((B,), 20, dtype=torch.int32)
        call = paged._Call(torch, q, pool, pool, table, lens, lens - 1, None, True)
        out, lse = paged._cuda_decode(torch, call, None, None, 0.125)
        assert tuple(out.shape) == (B, 4, 1, 64) and tuple(lse.shape) == (B, 4, 1)
    assert calls["size"] == 2
    assert calls["run"] == [([2, 4, 1, 64], 8192, True, True)] * 3 + [([3, 4, 1, 64], 12288, True, True)]
    variant, snames, bnames, values, buffers = paged._bound(None, _torch_api.noop_mask)
    spec = _torch_api._bound_values(None, _torch_api.noop_mask)[0]
    assert variant is _torch_ops._decode(spec, "")[0] and (snames, bnames, values, buffers) == ((), (), [], [])
