"""torch.compile with flexattn's masks and guards on CPU tensors: create_block_mask inside compiled code (the op
flexattn::block_mask), and the values a compiled mod reads through objects (guarded, so a change recompiles, and
only those). Split from test_native_torch.py. Skipped without torch or _C."""

import pytest

torch = pytest.importorskip("torch")

import flexattn  # noqa: E402
import flexattn.torch as fat  # noqa: E402
from flexattn import _native  # noqa: E402

if _native.load() is None:
    pytest.skip(f"flexattn._C not built: {_native.error()}", allow_module_level=True)

import torch._dynamo.testing  # noqa: E402
from torch_reference import flex, needs_parts, rand  # noqa: E402


_MASK_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
                "full_q_num_blocks", "full_q_indices")


def _same_block_mask(got, want):
    assert type(got) is type(want) and got.seq_lengths == want.seq_lengths and got.BLOCK_SIZE == want.BLOCK_SIZE
    for f in _MASK_FIELDS:
        assert torch.equal(getattr(got, f), getattr(want, f)), f


def _causal_mask(b, h, qi, kv):
    return qi >= kv


def test_create_block_mask_inside_fullgraph_compile_is_a_graph_node():
    """create_block_mask inside a compiled function broke the graph at the tracer's lock, and fullgraph failed: the
    mask is now built by the op flexattn::block_mask, so a model that makes its mask in forward compiles whole."""
    q = rand(1, 2, 200, 16, grad=False)

    def f(q, L):
        bm = flexattn.create_block_mask(_causal_mask, None, 2, L, L, device="cpu", BLOCK_SIZE=64)
        return flex(q, q, q, block_mask=bm), bm

    backend = torch._dynamo.testing.EagerAndRecordGraphs()
    out, bm = torch.compile(f, backend=backend, fullgraph=True)(q, 200)
    want_out, want_bm = f(q, 200)
    _same_block_mask(bm, want_bm)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)
    assert len(backend.graphs) == 1
    assert "flexattn.block_mask.default" in [str(n.target) for n in backend.graphs[0].graph.nodes]


@needs_parts
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_document_mask_made_per_batch_inside_compile_follows_each_batch(backend):
    """The document pattern: a mask_mod over this batch's document ids (and a window number) defined inside the compiled
    function, its BlockMask built there on every call; each call's mask follows that call's ids."""
    torch.manual_seed(5)
    L = 300
    q, k, v = (rand(1, 2, L, 16, grad=False) for _ in range(3))

    def f(q, k, v, docs, window):
        def doc(b, h, qi, kv):
            return (docs[qi] == docs[kv]) & (qi >= kv) & (qi - kv < window)

        bm = flexattn.create_block_mask(doc, 1, 2, q.shape[2], k.shape[2], device="cpu")
        return flex(q, k, v, block_mask=bm), bm

    compiled = torch.compile(f, backend=backend, fullgraph=True)
    for window in (100, 150, 260):
        docs = torch.sort(torch.randint(0, 4, (L,))).values
        out, bm = compiled(q, k, v, docs, window)
        want_out, want_bm = f(q, k, v, docs, window)
        _same_block_mask(bm, want_bm)
        torch.testing.assert_close(out, want_out, rtol=0, atol=1e-6)


def test_torch_create_block_mask_inside_compile_when_enabled():
    """torch's create_block_mask routed to flexattn (flexattn.torch.enabled()) inside fullgraph compile."""
    from torch.nn.attention import flex_attention as tfa

    q = rand(1, 1, 130, 16, grad=False)
    with fat.enabled():
        def f(q):
            bm = tfa.create_block_mask(_causal_mask, 1, 1, 130, 130, device="cpu")
            return tfa.flex_attention(q, q, q, block_mask=bm), bm

        out, bm = torch.compile(f, backend="eager", fullgraph=True)(q)
        want_out, want_bm = f(q)
    assert isinstance(bm, tfa.BlockMask)
    _same_block_mask(bm, want_bm)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)


def test_create_block_mask_inside_compile_names_a_score_mod_given_as_mask_mod():
    def score(s, b, h, qi, kv):
        return s

    with pytest.raises(Exception, match="expected a mask_mod, got score_mod '.*score'"):
        torch.compile(lambda: flexattn.create_block_mask(score, 1, 1, 16, 16, device="cpu"), backend="eager",
                      fullgraph=True)()


def test_create_block_mask_inside_compile_keeps_dynamic_lengths_symbolic():
    """The sizes were turned into ints (operator.index) inside the graph, so dynamic=True recompiled for every length
    (fullgraph failed at the recompile limit) and mark_dynamic raised."""
    def f(q):
        bm = flexattn.create_block_mask(_causal_mask, None, None, q.shape[2], q.shape[2], device="cpu", BLOCK_SIZE=64)
        return flex(q, q, q, block_mask=bm), bm.kv_num_blocks

    cnt = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(f, backend=cnt, fullgraph=True, dynamic=True)
    for L in list(range(64, 704, 64)) + [17, 1000]:
        q = rand(1, 1, L, 8, grad=False)
        (out, num), (want_out, want_num) = compiled(q), f(q)
        assert torch.equal(num, want_num)
        torch.testing.assert_close(out, want_out, rtol=0, atol=1e-6)
    assert cnt.frame_count <= 3  # (one block vs several specialise the mask tensors' contiguity guards)


@needs_parts
@pytest.mark.parametrize("position", ["int", "tensor"])
def test_a_decode_step_slices_its_mask_in_one_graph_for_every_position(position):
    """gpt-fast's decode step, compiled whole: the prebuilt mask's query-block row sliced by the position. Slices went
    through numpy (fullgraph failed: 'Unsupported ndarray attribute access'; without it, graph breaks); a symbolic
    int position then guarded the slice's bounds on its value (a recompile per query block)."""
    S = 1000  # 8 rows of 128, the last of 104 tokens
    bm_full = flexattn.create_block_mask(_causal_mask, 1, 1, S, S, device="cpu")
    k, v = rand(1, 2, S, 16, grad=False), rand(1, 2, S, 16, grad=False)

    def step(q, pos):
        bm = bm_full[:, :, pos // 128]
        offset = pos if position == "int" else pos[0]  # (gpt-fast: input_pos[0])
        bm.mask_mod = lambda b, h, qi, kv: qi + offset >= kv
        bm.seq_lengths = (1, S)
        return flex(q, k, v, block_mask=bm)

    cnt = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(step, backend=cnt, fullgraph=True, dynamic=True)
    for p in (300, 500, 127, 128, 999, 900):
        q = rand(1, 2, 1, 16, grad=False)
        pos = p if position == "int" else torch.tensor([p])
        want = flex(q, k[:, :, :p + 1], v[:, :, :p + 1])  # causal at row p: keys 0..p
        torch.testing.assert_close(compiled(q, pos), want, rtol=0, atol=1e-12)
        torch.testing.assert_close(step(q, pos), want, rtol=0, atol=1e-12)
    assert cnt.frame_count == 1


def test_create_block_mask_inside_compile_matches_eager_on_its_options_and_captures():
    """separate_full_blocks=False (numpy in the eager merge: failed fullgraph), a bfloat16 capture (numpy has no bf16:
    failed), a capture that requires grad (a block mask needs no gradient: refused only under compile)."""
    t = torch.randn(128).bfloat16()
    w = torch.nn.Parameter(torch.randn(128))
    cases = [
        (lambda b, h, q, kv: (q >= kv) & (q - kv < 40), {"separate_full_blocks": False}),
        (lambda b, h, q, kv: t[q] > t[kv], {}),
        (lambda b, h, q, kv: w[q] > w[kv], {}),
    ]
    for mask_mod, options in cases:
        def f(x):
            return flexattn.create_block_mask(mask_mod, 1, 1, 128, 128, device="cpu", BLOCK_SIZE=32, **options)

        got, want = torch.compile(f, backend="eager", fullgraph=True)(1), f(1)
        for field in _MASK_FIELDS:
            a, b = getattr(got, field), getattr(want, field)
            assert (a is None and b is None) or torch.equal(a, b), field


@needs_parts
def test_a_mod_that_branches_on_a_captured_tensor_value_is_refused_under_compile():
    """int(t) of a captured 0-d tensor is a constant of the plan, and Dynamo cannot guard on a tensor's value: the
    compiled mask kept the first value (stale masks, no error). Now refused, naming the tensor."""
    def f(t):
        def band(b, h, q, kv):
            return q - kv < int(t)

        return flexattn.create_block_mask(band, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=32)

    with pytest.raises(Exception, match="depends on the value of closure variable 't' .* in Python"):
        torch.compile(f, backend="aot_eager", fullgraph=True)(torch.tensor(5))


def test_create_block_mask_inside_compile_for_cuda_without_a_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(Exception, match="finds no CUDA device"):
        torch.compile(lambda: flexattn.create_block_mask(_causal_mask, 1, 1, 64, 64, device="cuda"), backend="eager")()


@needs_parts
def test_values_a_compiled_mod_reads_through_self_recompile_when_they_change():
    """Only int / float instance attributes two levels deep were guarded under compile: a bool or str steering a branch,
    None becoming a number, a class attribute, an nn.ModuleList item and an attribute four levels deep ran stale."""
    class Deep:
        pass

    class Layer(torch.nn.Module):
        SCALE = 1.0

        def __init__(self):
            super().__init__()
            self.causal, self.kind, self.cap = True, "mul", None
            self.layers = torch.nn.ModuleList([torch.nn.Module()])
            self.layers[0].w = 1.0
            self.a = Deep()
            self.a.b = Deep()
            self.a.b.c = Deep()
            self.a.b.c.w = 1.0

        def score(self, s, b, h, qi, kv):
            s = s * self.SCALE * self.layers[0].w * self.a.b.c.w
            s = s * 0.5 if self.kind == "mul" else s + 0.5
            if self.cap is not None:
                s = s + self.cap
            return torch.where(qi >= kv, s, s - 1.0) if self.causal else s

        def forward(self, q):
            return flex(q, q, q, score_mod=self.score)

    m = Layer()
    compiled = torch.compile(m, backend="eager", fullgraph=True)
    q = rand(1, 1, 8, 4, grad=False) * 0.3
    changes = [lambda: setattr(m, "causal", False), lambda: setattr(m, "kind", "add"), lambda: setattr(m, "cap", 0.7),
               lambda: setattr(Layer, "SCALE", 2.0), lambda: setattr(m.layers[0], "w", 3.0),
               lambda: setattr(m.a.b.c, "w", 0.5)]
    try:
        for change in [lambda: None] + changes:
            change()
            got = compiled(q)
            flexattn.clear_cache()
            torch.testing.assert_close(got, m(q), rtol=0, atol=1e-9)
    finally:
        Layer.SCALE = 1.0


@needs_parts
def test_compiled_bound_method_recompiles_only_for_what_it_reads():
    """Every number / bool of the objects a mod reaches was guarded, so a step counter or train() / eval() the mod
    never reads recompiled each step (fullgraph failed at the limit); an IntEnum / Flag attribute failed planning,
    a nan one and a logging.Logger broke it. A bound method whose reads were recorded is guarded on those only."""
    import enum
    import logging

    class Kind(enum.IntEnum):
        SLIDING = 1

    class Bits(enum.Flag):
        A = 1

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cap, self.cache_len = 20.0, 0
            self.kind, self.bits, self.odd = Kind.SLIDING, Bits.A, float("nan")
            self.logger = logging.getLogger("flexattn-test")

        def score(self, s, b, h, qi, kv):
            return torch.tanh(s / self.cap) * self.cap

        def forward(self, q):
            return flex(q, q, q, score_mod=self.score)

    m = Layer()
    cnt = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(m, backend=cnt, fullgraph=True)
    q = rand(1, 1, 8, 4, grad=False)
    for step in range(10):
        m.cache_len = step
        m.train(step % 2 == 0)
        torch.testing.assert_close(compiled(q), m(q), rtol=0, atol=1e-9)
    assert cnt.frame_count == 1
    m.cap = 2.0  # what it reads still recompiles
    torch.testing.assert_close(compiled(q), m(q), rtol=0, atol=1e-9)
    assert cnt.frame_count == 2
