"""Captured values: Python numbers and 0-d tensors become runtime scalars, tensors become buffers, and the
trace is cached by structure (code + types/dtypes/shapes), never by values."""
import functools

import numpy as np
import pytest

import flexattn
from flexattn import ops
from flexattn._tracer import stats

GLOBAL_SCALE = 0.5
GLOBAL_BIAS = np.arange(12, dtype=np.float32).reshape(3, 4)


def make_softcap(soft_cap):
    def softcap(score, b, h, q_idx, kv_idx):
        return soft_cap * ops.tanh(score / soft_cap)
    return softcap


def test_closure_float_becomes_named_runtime_scalar():
    t = flexattn.trace(make_softcap(30.0))
    assert t.text == "soft_cap * tanh(score / soft_cap)"
    assert t.scalars == {"soft_cap": 30.0} and t.scalar_types == {"soft_cap": "f32"}
    assert t.sources["soft_cap"] == "closure variable 'soft_cap' of make_softcap.<locals>.softcap"


def test_changing_a_captured_scalar_never_retraces():
    a = flexattn.trace(make_softcap(30.0))
    b = flexattn.trace(make_softcap(20.0))
    assert not a.cached and b.cached
    assert b.text == a.text and b.root is a.root
    assert b.scalars == {"soft_cap": 20.0}
    assert stats["traces"] == 1 and stats["hits"] == 1
    np.testing.assert_allclose(b.evaluate(score=np.array([10.0])), 20.0 * np.tanh(10.0 / 20.0))


def test_int_closure_is_i32_scalar_and_a_huge_int_is_i64():
    def make(offset):
        return lambda b, h, q, kv: q + offset >= kv
    small = flexattn.trace(make(5))
    assert small.text == "q_idx + offset{i32} >= kv_idx" and small.scalars == {"offset": 5}
    big = flexattn.trace(make(2**40))
    assert not big.cached and big.scalar_types == {"offset": "i64"}
    assert flexattn.trace(make(-7)).cached


def test_global_and_default_argument_scalars():
    def mod(score, b, h, q_idx, kv_idx, alpha=2.0):
        return score * GLOBAL_SCALE + alpha
    t = flexattn.trace(mod)
    assert t.kind == "score_mod"
    assert t.text == "score * GLOBAL_SCALE + alpha"
    assert t.scalars == {"GLOBAL_SCALE": 0.5, "alpha": 2.0}
    assert t.sources["alpha"].startswith("default argument 'alpha'")
    assert t.sources["GLOBAL_SCALE"].startswith("global 'GLOBAL_SCALE'")


def test_partial_arguments_are_scalars():
    def mod(score, b, h, q_idx, kv_idx, slope):
        return score - slope * (q_idx - kv_idx)
    t = flexattn.trace(functools.partial(mod, slope=0.25))
    assert t.kind == "score_mod" and t.text == "score - slope * (q_idx - kv_idx)"
    assert t.scalars == {"slope": 0.25}
    assert flexattn.trace(functools.partial(mod, slope=0.5)).cached


def test_numpy_buffer_is_bound_by_value_and_keyed_by_shape_and_dtype():
    def make(bias):
        return lambda s, b, h, q, kv: s + bias[h, q - kv]
    bias = np.random.rand(3, 16).astype(np.float32)
    t = flexattn.trace(make(bias))
    assert t.text == "score + bias[h, q_idx - kv_idx]"
    assert t.buffers["bias"] is bias and t.buffer_dtypes == {"bias": "f32"}
    assert flexattn.trace(make(bias * 2)).cached
    assert not flexattn.trace(make(np.zeros((3, 17), np.float32))).cached
    t16 = flexattn.trace(make(np.zeros((3, 16), np.float16)))
    assert not t16.cached and t16.text == "score + bias{f16}[h, q_idx - kv_idx]"


@pytest.mark.parametrize("dtype,ir", [(np.float64, "f32"), (np.int64, "i64"), (np.int32, "i32"), (np.int16, "i32"),
                                      (np.bool_, "bool")])
def test_buffer_dtypes(dtype, ir):
    doc = np.zeros(8, dtype=dtype)
    t = flexattn.trace(lambda b, h, q, kv: doc[q] == doc[kv])
    assert t.buffer_dtypes == {"doc": ir}
    assert t.plan()["buffers"]["doc"]["shape"] == (8,)


def test_document_mask_values_through_the_evaluator():
    doc = np.array([0, 0, 0, 1, 1, 2, 2, 2], dtype=np.int64)
    t = flexattn.trace(lambda b, h, q, kv: doc[q] == doc[kv])
    q, kv = np.arange(8)[:, None], np.arange(8)[None, :]
    np.testing.assert_array_equal(t.evaluate(q_idx=q, kv_idx=kv), doc[:, None] == doc[None, :])


def test_chained_and_literal_indexing():
    table = np.ones((2, 3, 4), np.float32)
    t = flexattn.trace(lambda s, b, h, q, kv: s + table[1][h][kv % 4])
    assert t.text == "score + table[1, h, kv_idx % 4]"
    assert flexattn.trace(lambda s, b, h, q, kv: s + table[1, h, -1]).text == "score + table[1, h, -1]"


def test_zero_dim_arrays_and_numpy_scalars_are_typed_scalars():
    offset = np.array(3, dtype=np.int64)
    scale = np.float32(0.5)
    t = flexattn.trace(lambda s, b, h, q, kv: s * scale + (q - offset))
    assert t.text == "score * scale + (q_idx - offset{i64})"
    assert t.scalars == {"scale": 0.5, "offset": 3}
    assert t.scalar_types == {"scale": "f32", "offset": "i64"}


def test_combined_mods_with_same_capture_names_get_distinct_scalars():
    def window(n):
        return lambda b, h, q, kv: q - kv < n
    t = flexattn.trace(flexattn.and_masks(window(4), window(9)))
    assert t.text == "_t0 = q_idx - kv_idx;\n_t0 < n{i32} && _t0 < n_2{i32}"
    assert t.scalars == {"n": 4, "n_2": 9}
    assert flexattn.trace(flexattn.and_masks(window(1), window(2))).cached


def test_the_same_array_captured_twice_is_one_buffer():
    doc = np.zeros(8, np.int32)
    m1 = lambda b, h, q, kv: doc[q] == doc[kv]  # noqa: E731
    m2 = lambda b, h, q, kv: doc[q] >= 0  # noqa: E731
    t = flexattn.trace(flexattn.or_masks(m1, m2))
    assert list(t.buffers) == ["doc"]
    other = np.zeros(8, np.int32)
    m3 = lambda b, h, q, kv: other[q] >= 0  # noqa: E731
    t2 = flexattn.trace(flexattn.or_masks(m1, m3))
    assert sorted(t2.buffers) == ["doc", "other"]


def test_unused_captures_are_not_in_the_plan():
    unused = 3.0
    t = flexattn.trace(lambda s, b, h, q, kv: s if unused else s)  # `if unused` reads it in Python
    assert t.scalars == {} and t.text == "score"


def test_branching_on_a_scalar_specialises_and_is_rechecked():
    def make(causal, window):
        def mod(b, h, q, kv):
            keep = q - kv < window
            if causal > 0:
                keep = keep & (q >= kv)
            return keep
        return mod
    a = flexattn.trace(make(1, 8))
    assert a.text == "q_idx - kv_idx < window{i32} && q_idx >= kv_idx"
    assert flexattn.trace(make(2, 16)).cached  # same branch: still one trace
    c = flexattn.trace(make(0, 8))
    assert not c.cached and c.text == "q_idx - kv_idx < window{i32}"
    assert flexattn.trace(make(5, 3)).cached and flexattn.trace(make(-1, 3)).cached
    assert stats["traces"] == 2


def test_scalar_used_as_python_int_specialises():
    def make(n):
        def mod(s, b, h, q, kv):
            for _ in range(n):
                s = s * 0.5
            return s
        return mod
    assert flexattn.trace(make(2)).text == "score * 0.5 * 0.5"
    assert flexattn.trace(make(3)).text == "score * 0.5 * 0.5 * 0.5"
    assert flexattn.trace(make(2)).cached


def test_bool_captures_are_structure():
    def make(causal):
        return lambda b, h, q, kv: (q >= kv) if causal else (q >= 0)
    assert flexattn.trace(make(True)).text == "q_idx >= kv_idx"
    f = flexattn.trace(make(False))
    assert not f.cached and f.text == "q_idx >= 0"


def test_helper_functions_and_their_globals_are_walked():
    def rel(q, kv):
        return GLOBAL_BIAS[q % 3, kv % 4]

    t = flexattn.trace(lambda s, b, h, q, kv: s + rel(q, kv))
    assert t.text == "score + GLOBAL_BIAS[q_idx % 3, kv_idx % 4]" and "GLOBAL_BIAS" in t.buffers


def test_bound_method_mod():
    class Alibi:
        def __init__(self, slope):
            self.slope = slope

        def score_mod(self, score, b, h, q_idx, kv_idx):
            return score + self.slope * (kv_idx - q_idx)

    t = flexattn.trace(Alibi(0.5).score_mod)
    assert t.kind == "score_mod" and t.text == "score + 0.5 * (kv_idx - q_idx)"
    # attributes are read at trace time; a different object is a different key
    assert not flexattn.trace(Alibi(0.25).score_mod).cached


def test_plan_describes_everything_the_backend_binds():
    bias = np.ones((2, 5), np.float32)
    cap = 10.0

    def mod(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap) + bias[h, kv_idx]
    plan = flexattn.trace(mod).plan()
    assert plan["kind"] == "score_mod" and plan["text"] == "cap * tanh(score / cap) + bias[h, kv_idx]"
    assert plan["scalars"] == {"cap": {"type": "f32", "value": 10.0, "source": "closure variable 'cap' of "
                                       "test_plan_describes_everything_the_backend_binds.<locals>.mod"}}
    assert plan["buffers"]["bias"]["dtype"] == "f32" and plan["buffers"]["bias"]["object"] is bias


def test_reserved_names_are_renamed():
    q = 2.0  # a capture named like an input would shadow it in the text form

    def helper(x):
        return x * q
    t = flexattn.trace(lambda s, b, h, qi, kv: helper(s))
    assert t.text == "score * q_" and t.scalars == {"q_": 2.0}


def test_lambda_in_a_loop_shares_one_trace():
    mods = [(lambda s, b, h, q, kv, c=c: s * c) for c in (1.0, 2.0, 3.0)]
    texts = {flexattn.trace(m).text for m in mods}
    assert texts == {"score * c"} and stats["traces"] == 1


def test_non_ascii_names_become_ascii_ir_names():
    """`α = 0.5` failed in the native parser ("expected a token, found byte 0xce"), naming neither mod nor variable."""
    α = 0.5
    größe = {"bias_ä": 2}

    def score(s, b, h, q_idx, kv_idx):
        return s * α + größe["bias_ä"]

    t = flexattn.trace(score)
    assert t.text.isascii() and set(t.scalars.values()) == {0.5, 2}
    assert flexattn.trace(score).evaluate(score=1.0).item() == 2.5


def test_captured_int_to_a_negative_power_is_a_float_as_in_python():
    def make(n, e):
        return lambda s, b, h, q, kv: s * n ** -1 + 2 ** e
    t = flexattn.trace(make(4, 3))
    np.testing.assert_allclose(t.evaluate(score=np.array([1.0])), 1.0 / 4 + 8)
    assert t.text == "score * f32(n{i32}) ** -1 + 2 ** e{i32}"
    # the exponent's sign is part of the trace: a negative captured exponent retraces once, to a float power
    neg = flexattn.trace(make(4, -2))
    assert not neg.cached and neg.text == "score * f32(n{i32}) ** -1 + f32(2) ** e{i32}"
    np.testing.assert_allclose(neg.evaluate(score=np.array([1.0])), 1.0 / 4 + 0.25)
    assert flexattn.trace(make(8, 5)).cached and flexattn.trace(make(8, -1)).cached
    # a per-position exponent keeps integer semantics (torch's integer pow)
    t2 = flexattn.trace(lambda s, b, h, q, kv: s + 2 ** (kv - q))
    np.testing.assert_allclose(t2.evaluate(score=np.zeros(3), q_idx=np.array([0, 2, 0]), kv_idx=np.array([3, 1, 0])),
                               [8.0, 0.0, 1.0])


def test_slices_of_captured_tensors_index_into_the_view():
    """rel[:, 15:][h, i], rel[h][::2][j], rel[..., 3:10], rel[1:3]: a slice with Python int bounds narrows the
    dimension (was refused); an index into the view is clamped to it, a negative Python int counts from its end."""
    rel = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    h, q, kv = np.arange(4)[:, None, None], np.arange(9)[None, :, None], np.arange(70)[None, None, :]
    cases = [
        (lambda s, b, h, q, kv: rel[:, 15:][h, abs(q - kv)], rel[h, np.clip(abs(q - kv), 0, 48) + 15]),
        (lambda s, b, h, q, kv: rel[h][::2][kv % 40], rel[h, 2 * np.clip(kv % 40, 0, 31)]),
        (lambda s, b, h, q, kv: rel[..., 3:10][h, q % 7], rel[h, q % 7 + 3]),
        (lambda s, b, h, q, kv: rel[1:3, :][h % 2, kv], rel[h % 2 + 1, np.clip(kv, 0, 63)]),
        (lambda s, b, h, q, kv: rel[h, 10:20][-1] + 0 * q, rel[h, 19] + 0 * q),
        (lambda s, b, h, q, kv: rel[h, 2:6].sum() + 0 * q, rel[h, 2:6].sum(-1) + 0 * q),
    ]
    for mod, want in cases:
        got = flexattn.trace(mod, "score_mod").evaluate(score=0.0, h=h, q_idx=q, kv_idx=kv)
        np.testing.assert_array_equal(np.broadcast_to(got, np.broadcast(h, q, kv).shape),
                                      np.broadcast_to(want, np.broadcast(h, q, kv).shape))
