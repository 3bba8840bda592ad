"""flexattn.paged_attention's CUDA path (the native decode kernels through flexattn._C.cuda_decode) against
its CPU path (gather + flex_attention on float64 host copies, itself checked against a definition-level
reference in tests/python/test_paged.py). Skipped without a CUDA device, torch or the compiled extension.

Tolerances follow tests/gpu/decode/gpu_decode_check.cc: out within 4 x the dtype's rounding of P relative to
max |out|, lse within 1e-3; rows that attend nothing must be out 0 / lse -inf exactly."""
import pytest

from .backend import require

torch, C = require()  # noqa: F841 (C: the backend is usable)

import flexattn  # noqa: E402
from flexattn import create_block_mask, paged_attention  # noqa: E402

DEV = "cuda"
CAP = 20.0
WINDOW = 256


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def sliding(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def softcap(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def on_cpu(x):
    return x if not isinstance(x, torch.Tensor) else x.detach().cpu()


def cpu_path(q, k, v, table, lens, **kw):
    """The same call on float64 CPU copies (the CPU path); captured CUDA buffers are moved by flexattn."""
    f64 = (lambda t: t.detach().cpu().double())
    mask = kw.pop("block_mask", None)
    if mask is not None:
        mask = mask.to("cpu")
    return paged_attention(f64(q), f64(k), f64(v), on_cpu(table), on_cpu(lens), block_mask=mask,
                           **{n: on_cpu(x) for n, x in kw.items()})


def compare(got, want, dtype):
    out, lse = got
    ref_out, ref_lse = want
    out, lse = out.double().cpu(), lse.double().cpu()
    assert torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse)), "rows attending nothing differ"
    empty = torch.isneginf(ref_lse)
    assert torch.all(out[empty] == 0)
    p_err = 1.0 / 256 if dtype == torch.bfloat16 else 1.0 / 2048
    scale = max(float(ref_out.abs().max()), 1e-6)
    err_out = float((out - ref_out).abs().max()) / scale
    finite = ~empty
    err_lse = float((lse[finite] - ref_lse[finite]).abs().max()) if finite.any() else 0.0
    assert err_out <= 4 * p_err and err_lse <= 1e-3, f"out err {err_out:.2e}, lse err {err_lse:.2e}"


def make_pages(B, Hkv, S, D, Dv, page_size, lens, dtype, gen):
    """A pool with each sequence's pages at shuffled ids (and -1 past its length)."""
    max_pages = (S + page_size - 1) // page_size
    used = [(int(n) + page_size - 1) // page_size for n in lens]
    num_pages = sum(used) + 2
    ids = torch.randperm(num_pages, generator=gen)
    table = torch.full((B, max_pages), -1, dtype=torch.int32)
    at = 0
    for b, u in enumerate(used):
        table[b, :u] = ids[at:at + u].int()
        at += u
    k = torch.randn(num_pages, Hkv, page_size, D, generator=gen).to(DEV, dtype)
    v = torch.randn(num_pages, Hkv, page_size, Dv, generator=gen).to(DEV, dtype)
    return k, v, table.to(DEV)


CASES = [  # (name, B, Hq, Hkv, L, S, D, page_size or 0 = contiguous, mod)
    ("contiguous-full-L1", 4, 32, 8, 1, 1000, 128, 0, None),
    ("contiguous-causal-L17-gqa1", 2, 8, 8, 17, 777, 64, 0, "causal"),
    ("contiguous-softcap-L64-gqa8", 2, 32, 4, 64, 513, 128, 0, "softcap+causal"),
    ("page1-causal-L1", 3, 16, 4, 1, 300, 128, 1, "causal"),
    ("page16-sliding-L5", 3, 16, 2, 5, 2049, 128, 16, "sliding"),
    ("page128-bias-L1-gqa8", 2, 16, 2, 1, 4100, 128, 128, "bias"),
    ("page16-d80-padded", 2, 8, 2, 3, 200, 80, 16, "causal"),
    ("page16-d256", 2, 8, 8, 2, 600, 256, 16, "softcap+causal"),
    ("page100-full-L1", 3, 32, 8, 1, 1000, 128, 100, None),  # a page size that is not a power of two (division)
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cuda_matches_cpu_path(case, dtype):
    name, B, Hq, Hkv, L, S, D, page_size, mod = case
    gen = torch.Generator().manual_seed(len(name))
    lens = torch.randint(1, S + 1, (B,), generator=gen, dtype=torch.int32)
    lens[0] = S
    if B > 2:
        lens[1] = 0  # an empty sequence: out 0, lse -inf
    offs = torch.clamp(lens - L, min=0).int()
    q = torch.randn(B, Hq, L, D, generator=gen).to(DEV, dtype)
    if page_size:
        k, v, table = make_pages(B, Hkv, S, D, D, page_size, lens.tolist(), dtype, gen)
        cap = table.shape[1] * page_size
    else:
        k = torch.randn(B, Hkv, S, D, generator=gen).to(DEV, dtype)
        v = torch.randn(B, Hkv, S, D, generator=gen).to(DEV, dtype)
        table, cap = None, S
    kw = dict(q_offsets=offs.to(DEV), return_lse=True)
    if mod in ("causal", "softcap+causal"):
        kw["block_mask"] = create_block_mask(causal, 1, 1, cap, cap, device=DEV)
    if mod == "sliding":
        kw["block_mask"] = create_block_mask(sliding, 1, 1, cap, cap, device=DEV)
    if mod == "softcap+causal":
        kw["score_mod"] = softcap
    if mod == "bias":
        bias = torch.randn(cap, generator=gen).to(DEV)

        def with_bias(score, b, h, q_idx, kv_idx):
            return score + bias[kv_idx]

        kw["score_mod"] = with_bias
    got = paged_attention(q, k, v, table, lens.to(DEV), **kw)
    compare(got, cpu_path(q, k, v, table, lens, **kw), dtype)


def test_vllm_page_layout_through_strides_and_kv_batch_broadcast():
    gen = torch.Generator().manual_seed(1)
    B, Hq, Hkv, L, D, ps = 2, 8, 2, 1, 128, 16
    lens = torch.tensor([100, 37], dtype=torch.int32)
    k, v, table = make_pages(B, Hkv, 128, D, D, ps, lens.tolist(), torch.bfloat16, gen)
    # [num_pages, page_size, Hkv, D] storage seen as [num_pages, Hkv, page_size, D]
    k_vllm, v_vllm = k.transpose(1, 2).contiguous().transpose(1, 2), v.transpose(1, 2).contiguous().transpose(1, 2)
    q = torch.randn(B, Hq, L, D, generator=gen).to(DEV, torch.bfloat16)
    kw = dict(q_offsets=(lens - 1).to(DEV), return_lse=True)
    got = paged_attention(q, k_vllm, v_vllm, table, lens.to(DEV), **kw)
    compare(got, cpu_path(q, k, v, table, lens, **kw), torch.bfloat16)
    # a contiguous cache of batch 1 shared by every sequence
    kc = torch.randn(1, Hkv, 300, D, generator=gen).to(DEV, torch.bfloat16)
    vc = torch.randn(1, Hkv, 300, D, generator=gen).to(DEV, torch.bfloat16)
    got = paged_attention(q, kc, vc, None, lens.to(DEV), **kw)
    compare(got, cpu_path(q, kc, vc, None, lens, **kw), torch.bfloat16)


def test_unmapped_pages_below_the_length_are_masked_without_validation():
    """Page ids outside the pool (-1, num_pages, a huge id) inside kv_len: the kernels mask those rows,
    as the CPU path and torch's PagedAttention do; no out-of-bounds read (memcheck runs this suite's
    C++ twin)."""
    gen = torch.Generator().manual_seed(3)
    B, Hq, Hkv, L, D, ps = 3, 8, 2, 1, 128, 16
    lens = torch.tensor([64, 64, 64], dtype=torch.int32)
    k, v, table = make_pages(B, Hkv, 64, D, D, ps, lens.tolist(), torch.bfloat16, gen)
    num_pages = k.shape[0]
    table[0, 1] = -1
    table[1, 0], table[1, 3] = num_pages, 1 << 30
    table[2, :] = -1  # every page unmapped: the row attends nothing
    q = torch.randn(B, Hq, L, D, generator=gen).to(DEV, torch.bfloat16)
    kw = dict(q_offsets=(lens - 1).to(DEV), return_lse=True)
    got = paged_attention(q, k, v, table, lens.to(DEV), validate=False, **kw)
    want = cpu_path(q, k, v, table, lens, validate=False, **kw)
    compare(got, want, torch.bfloat16)
    assert torch.isneginf(got[1][2]).all() and bool(torch.isfinite(got[1][:2]).all())


def test_cuda_graph_replay_follows_the_lengths():
    """A captured step re-reads kv_lens / q_offsets / the page table from device memory on replay, so one
    graph serves every step (validation is skipped while capturing: no sync)."""
    gen = torch.Generator().manual_seed(2)
    B, Hq, Hkv, D, ps, S = 2, 16, 4, 128, 16, 1024
    lens = torch.tensor([500, 900], dtype=torch.int32)
    k, v, table = make_pages(B, Hkv, S, D, D, ps, [S, S], torch.bfloat16, gen)
    q = torch.randn(B, Hq, 1, D, generator=gen).to(DEV, torch.bfloat16)
    mask = create_block_mask(causal, 1, 1, table.shape[1] * ps, table.shape[1] * ps, device=DEV)
    d_lens, d_offs = lens.to(DEV), (lens - 1).to(DEV)
    kw = dict(block_mask=mask, return_lse=True)
    paged_attention(q, k, v, table, d_lens, q_offsets=d_offs, **kw)  # compiles outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        paged_attention(q, k, v, table, d_lens, q_offsets=d_offs, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = paged_attention(q, k, v, table, d_lens, q_offsets=d_offs, **kw)
    for new in ([500, 900], [1, 1024], [777, 3]):
        d_lens.copy_(torch.tensor(new, dtype=torch.int32))
        d_offs.copy_(torch.tensor(new, dtype=torch.int32) - 1)
        graph.replay()
        torch.cuda.synchronize()
        compare((out, lse), cpu_path(q, k, v, table, torch.tensor(new, dtype=torch.int32),
                                     q_offsets=torch.tensor(new, dtype=torch.int32) - 1, **kw), torch.bfloat16)


def test_cuda_errors_from_the_native_checks():
    """A kv BLOCK_SIZE the decode kernels cannot walk is reported by the native validation as a ValueError."""
    q = torch.zeros(1, 2, 1, 64, device=DEV, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 64, 64, device=DEV, dtype=torch.bfloat16)
    mask = create_block_mask(causal, 1, 1, 64, 64, device=DEV, BLOCK_SIZE=16)
    with pytest.raises(ValueError, match="block_mask: the decode kernels need a kv BLOCK_SIZE"):
        paged_attention(q, k, k, block_mask=mask)
    assert flexattn.paged_attention is paged_attention


def test_captured_values_and_mask_edits_are_seen_every_step():
    """The per-token host path binds the mods through a plan (python/flexattn/_bound_plan.py) and keeps each
    BlockMask's arguments (paged._MaskArgs): a captured int rebound between steps, a captured float, a
    captured tensor edited in place and a block mask edited in place must each reach the next step. Every
    step is compared with the CPU path of the same call, and consecutive steps must differ."""
    gen = torch.Generator().manual_seed(4)
    B, Hq, Hkv, D, ps, S = 2, 8, 2, 128, 16, 1024
    lens = torch.tensor([1024, 700], dtype=torch.int32)
    k, v, table = make_pages(B, Hkv, S, D, D, ps, lens.tolist(), torch.bfloat16, gen)
    q = torch.randn(B, Hq, 1, D, generator=gen).to(DEV, torch.bfloat16)
    cap = table.shape[1] * ps
    W, gain = 1000, 1.0
    bias = torch.zeros(cap, device=DEV)

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)

    def scored(score, b, h, q_idx, kv_idx):
        return score * gain + bias[kv_idx]

    mask = create_block_mask(window, 1, 1, cap, cap, device=DEV)
    kw = dict(q_offsets=(lens - 1).to(DEV), score_mod=scored, block_mask=mask, return_lse=True)
    prev = None
    for step, (W, gain) in enumerate([(1000, 1.0), (1000, 1.0), (200, 1.0), (200, 0.5), (37, 0.5), (37, 0.5),
                                      (37, 0.5)]):
        if step == 5:
            bias[600:] += 3.0  # in place: the same tensor, new values
        if step == 6:  # in place: query block 7 (rows 896..1023, sequence 0's last row) attends nothing
            mask.kv_num_blocks[0, 0, 7] = 0
            mask.full_kv_num_blocks[0, 0, 7] = 0
        got = paged_attention(q, k, v, table, lens.to(DEV), **kw)
        compare(got, cpu_path(q, k, v, table, lens, **kw), torch.bfloat16)
        if prev is not None and step not in (1,):
            assert not torch.equal(got[1], prev[1]), f"step {step} did not see its change"
        prev = got
    assert torch.isneginf(prev[1][0]).all() and bool(torch.isfinite(prev[1][1]).all())
