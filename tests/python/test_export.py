"""torch.export and AOTInductor with flexattn's ops (deployment: torch's own flex_attention cannot export a dynamic
length with a block mask built in the graph, pytorch#152128). Skipped without torch or _C; the CUDA cases where torch
finds a GPU."""

import pytest

torch = pytest.importorskip("torch")

import flexattn  # noqa: E402
from flexattn import _native  # noqa: E402

if _native.load() is None:
    pytest.skip(f"flexattn._C not built: {_native.error()}", allow_module_level=True)
if not hasattr(torch, "export") or not hasattr(torch.export, "Dim"):
    pytest.skip("this torch has no torch.export with Dim", allow_module_level=True)

from torch_reference import dense  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


class Plain(torch.nn.Module):
    def forward(self, q, k, v):
        return flexattn.flex_attention(q, k, v)


class CausalSoftcap(torch.nn.Module):
    """The block mask is made in forward, so it is a node of the exported graph (flexattn::block_mask)."""

    def forward(self, q, k, v):
        bm = flexattn.create_block_mask(_causal, 1, 1, q.shape[2], k.shape[2], device=q.device)
        return flexattn.flex_attention(q, k, v, score_mod=_softcap, block_mask=bm)


class Documents(torch.nn.Module):
    """Document ids of a fixed maximum length, read at q_idx / kv_idx: the capture's shape is static, the length is not."""

    def forward(self, q, k, v, doc):
        def same_doc(b, h, q_idx, kv_idx):
            return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)

        bm = flexattn.create_block_mask(same_doc, 1, 1, q.shape[2], k.shape[2], device=q.device)
        return flexattn.flex_attention(q, k, v, block_mask=bm)


def _qkv(L, device, dtype=None):
    dtype = dtype or (torch.float32 if device == "cpu" else torch.bfloat16)
    return [torch.randn(1, 2, L, 64, device=device, dtype=dtype) for _ in range(3)]


def _close(a, b, device):
    tol = 1e-5 if device == "cpu" else 2e-2
    assert torch.allclose(a.float(), b.float(), atol=tol, rtol=tol), (a.float() - b.float()).abs().max().item()


@pytest.mark.parametrize("device", DEVICES)
def test_exported_program_matches_eager_and_the_definition_on_fresh_inputs(device):
    m = CausalSoftcap()
    ep = torch.export.export(m, tuple(_qkv(256, device)))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "flexattn.block_mask.default" in targets and "flexattn.attn_fwd.default" in targets, targets
    q, k, v = _qkv(256, device)
    out = ep.module()(q, k, v)
    assert torch.equal(out, m(q, k, v))
    want, _ = dense(q.double().cpu(), k.double().cpu(), v.double().cpu(), score=_softcap, mask=_causal)
    _close(out.cpu(), want, device)


def test_exported_program_survives_save_and_load(tmp_path):
    m = CausalSoftcap()
    ep = torch.export.export(m, tuple(_qkv(256, "cpu")))
    torch.export.save(ep, tmp_path / "m.pt2")
    q, k, v = _qkv(256, "cpu")
    assert torch.equal(torch.export.load(tmp_path / "m.pt2").module()(q, k, v), m(q, k, v))


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_length_without_a_mask_exports_from_two_tokens(device):
    L = torch.export.Dim("L", min=2, max=4096)
    ep = torch.export.export(Plain(), tuple(_qkv(256, device)), dynamic_shapes=({2: L},) * 3)
    for n in (2, 17, 1000):
        q, k, v = _qkv(n, device)
        assert torch.equal(ep.module()(q, k, v), Plain()(q, k, v)), n


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_length_with_the_mask_built_in_the_graph(device):
    """Non-strict export runs create_block_mask with torch.SymInt lengths, which the size check turned into ints: the
    export was specialised to the example's length (a constraint violation for a dynamic Dim). From 129 up: torch
    specialises sizes 0 and 1, and a mask of one query block (L <= 128) has such a size."""
    L = torch.export.Dim("L", min=129, max=4096)
    ep = torch.export.export(CausalSoftcap(), tuple(_qkv(256, device)), dynamic_shapes=({2: L},) * 3)
    for n in (129, 300, 1000):
        q, k, v = _qkv(n, device)
        assert torch.equal(ep.module()(q, k, v), CausalSoftcap()(q, k, v)), n


class RowOrder(torch.nn.Module):
    """The cuda path's row order (flex_attention adds it for the Hopper forward) on a mask built in the graph."""

    def forward(self, q, k):
        from flexattn import _torch_api
        bm = flexattn.create_block_mask(_causal, 1, 1, q.shape[2], k.shape[2], device=q.device)
        return _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, bm.kv_indices.shape[-1])


def test_the_row_order_keeps_the_block_count_dynamic():
    """The order's flag compared counts[..., :-1] with counts[..., 1:]: for an example of two query blocks those slices
    have one row, and the broadcast check specialised the export to 129..256 tokens (torch 2.11, the cuda case of the
    test above). Exported on the cpu, where this runs the same torch ops the cuda path does."""
    L = torch.export.Dim("L", min=129, max=4096)
    q, k, _ = _qkv(256, "cpu")
    ep = torch.export.export(RowOrder(), (q, k), dynamic_shapes=({2: L},) * 2)
    for n in (129, 300, 1000):
        q, k, _ = _qkv(n, "cpu")
        got, want = ep.module()(q, k), RowOrder()(q, k)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), n
        assert got[1].tolist() == [0] and got[0].tolist() == [[list(range(-(-n // 128)))[::-1]]], n


def test_a_length_within_one_query_block_stays_dynamic_where_the_row_order_is_decided(monkeypatch):
    """On a cuda device the row order is left out for at most 64 query rows (they run on the decode family): the test
    `q_len <= 64` guarded an export's length to one side of 64. A symbolic length that may lie either side now keeps
    the order, which the decode family ignores. The decision is made as on a cuda device; the rest runs on the cpu."""
    from flexattn import _torch_api
    real = _torch_api._row_order_mode_for
    monkeypatch.setattr(_torch_api, "_row_order_mode_for", lambda dev, qb, ql: real(torch.device("cuda"), qb, ql))
    assert _torch_api._row_order_mode_for(None, 128, 64) == "0" and _torch_api._row_order_mode_for(None, 128, 65) != "0"
    L = torch.export.Dim("L", min=2, max=128)
    for example in (100, 40):
        ep = torch.export.export(CausalSoftcap(), tuple(_qkv(example, "cpu")), dynamic_shapes=({2: L},) * 3)
        assert str(list(ep.range_constraints.values())[0]) == "VR[2, 128]", ep.range_constraints
        for n in (2, 64, 65, 128):
            q, k, v = _qkv(n, "cpu")
            assert torch.equal(ep.module()(q, k, v), CausalSoftcap()(q, k, v)), (example, n)


class PerBatch(torch.nn.Module):
    def forward(self, q, k, v):
        bm = flexattn.create_block_mask(_causal, q.shape[0], 1, q.shape[2], k.shape[2], device=q.device)
        return flexattn.flex_attention(q, k, v, block_mask=bm)


def test_a_mask_per_batch_keeps_the_batch_dynamic():
    """BlockMask.shape int()ed the batch, and the call's check read it every call: the export was specialised to the
    example's batch."""
    B, L = torch.export.Dim("B", min=2, max=64), torch.export.Dim("L", min=129, max=4096)
    q, k, v = (torch.randn(4, 2, 256, 64) for _ in range(3))
    ep = torch.export.export(PerBatch(), (q, k, v), dynamic_shapes=({0: B, 2: L},) * 3)
    for b, n in ((2, 129), (7, 300)):
        q, k, v = (torch.randn(b, 2, n, 64) for _ in range(3))
        assert torch.equal(ep.module()(q, k, v), PerBatch()(q, k, v)), (b, n)


def test_dynamic_length_with_a_fixed_size_captured_tensor():
    L = torch.export.Dim("L", min=129, max=2048)
    doc = torch.arange(2048) // 100
    ep = torch.export.export(Documents(), (*_qkv(256, "cpu"), doc), dynamic_shapes=({2: L},) * 3 + (None,))
    for n in (129, 1000):
        q, k, v = _qkv(n, "cpu")
        doc = torch.arange(2048) // 77  # other documents: a runtime input
        out = ep.module()(q, k, v, doc)
        assert torch.equal(out, Documents()(q, k, v, doc)), n
        want, _ = dense(q.double(), k.double(), v.double(),
                        mask=lambda b, h, i, j: (doc[i] == doc[j]) & (i >= j))
        _close(out, want, "cpu")


def test_a_captured_tensor_as_long_as_a_dynamic_length_is_an_export_error_naming_the_specialisation():
    """A trace bakes a capture's shape in (its index clamps), so such a shape cannot stay dynamic: torch's constraint
    error says so (the trace cache's key took the SymInt shape and raised 'unhashable type: non-nested SymInt')."""
    L = torch.export.Dim("L", min=129, max=2048)
    q, k, v = _qkv(256, "cpu")
    with pytest.raises(Exception, match="specialized it to be a constant"):
        torch.export.export(Documents(), (q, k, v, torch.arange(256) // 100),
                            dynamic_shapes=({2: L},) * 3 + ({0: L},))


def _aoti():
    inductor = pytest.importorskip("torch._inductor")
    if not hasattr(inductor, "aoti_compile_and_package"):
        pytest.skip("this torch has no aoti_compile_and_package")
    from flexattn import _torch_ops
    if not _torch_ops.OPTIONAL_TENSOR_LISTS:
        pytest.skip("this torch's custom_op refuses Optional[List[Tensor]] (torch 2.11): an empty list reaches the ops "
                    "as None under AOTInductor")
    return inductor


class Lse(torch.nn.Module):
    def forward(self, q, k, v):
        out, aux = flexattn.flex_attention(q, k, v, score_mod=_softcap, return_aux=flexattn.AuxRequest(lse=True))
        return out * 2, aux.lse


@pytest.mark.parametrize("module", [Plain, CausalSoftcap, Lse])
def test_aot_inductor_package_runs_ops_with_empty_list_arguments(module, tmp_path):
    """AOTInductor's proxy executor hands an empty list argument of a custom op over as None: a mod without captured
    tensors (or a call without a block mask) failed the op's schema check ('Expected a value of type List[Tensor] for
    argument buffers but instead found type NoneType'). The ops' list arguments are Optional now."""
    inductor = _aoti()
    m = module()
    ep = torch.export.export(m, tuple(_qkv(256, "cpu")))
    runner = inductor.aoti_load_package(inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2")))
    q, k, v = _qkv(256, "cpu")
    got, want = runner(q, k, v), m(q, k, v)
    got, want = (got if isinstance(got, (list, tuple)) else [got]), (want if isinstance(want, tuple) else [want])
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_ops_register_where_custom_op_refuses_optional_tensor_lists():
    """torch 2.11's infer_schema refuses Optional[List[Tensor]]: the Optional list arguments made `import` of flexattn's
    torch ops fail there (found on the device, every torch test a collection error). The ops then keep List[Tensor]."""
    import os
    import subprocess
    import sys
    code = """
import inspect, torch
orig = torch.library.infer_schema
def refusing(fn, *a, **k):
    for p in inspect.signature(fn).parameters.values():
        if "Optional[List[torch.Tensor]]" in str(p.annotation):
            raise ValueError("infer_schema(func): Parameter has unsupported type Optional[List[torch.Tensor]]")
    return orig(fn, *a, **k)
torch.library.infer_schema = refusing
import flexattn
from flexattn import _torch_ops
assert not _torch_ops.OPTIONAL_TENSOR_LISTS
schema = str(torch.ops.flexattn.attn_fwd.default._schema)
assert "Tensor[] buffers" in schema and "Tensor[] mask" in schema, schema
q = torch.randn(1, 2, 64, 16)
out = flexattn.flex_attention(q, q, q, score_mod=lambda s, b, h, i, j: s * 0.5)
print("ok", tuple(out.shape))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert r.returncode == 0 and "ok (1, 2, 64, 16)" in r.stdout, r.stdout + r.stderr
