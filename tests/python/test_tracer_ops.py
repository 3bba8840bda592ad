"""Every operation a mod may use: the IR text it traces to, the IR type, and agreement between the traced
IR (evaluated by the numpy interpreter) and the mod called directly on numpy grids."""
import math

import numpy as np
import pytest
from conftest import grids

import flexattn
from flexattn import ops
from flexattn._ir import input_leaf, python_literal, binary
from flexattn._print import print_text


def text(fn):
    return flexattn.trace(fn).text


# (mod, expected IR text)
SCORE_OPS = [
    (lambda s, b, h, q, kv: s + 1.5, "score + 1.5"),
    (lambda s, b, h, q, kv: 2 - s, "2 - score"),
    (lambda s, b, h, q, kv: s * 0.5, "score * 0.5"),
    (lambda s, b, h, q, kv: s / 30.0, "score / 30.0"),
    (lambda s, b, h, q, kv: s // 2, "score // 2"),
    (lambda s, b, h, q, kv: s % 3.0, "score % 3.0"),
    (lambda s, b, h, q, kv: s ** 2, "score ** 2"),
    (lambda s, b, h, q, kv: 2.0 ** s, "2.0 ** score"),
    (lambda s, b, h, q, kv: -s, "-score"),
    (lambda s, b, h, q, kv: +s, "score"),
    (lambda s, b, h, q, kv: abs(s), "abs(score)"),
    (lambda s, b, h, q, kv: ops.tanh(s), "tanh(score)"),
    (lambda s, b, h, q, kv: ops.tanh_approx(s), "tanh_approx(score)"),
    (lambda s, b, h, q, kv: 30.0 * ops.tanh_approx(s / 30.0), "30.0 * tanh_approx(score / 30.0)"),
    (lambda s, b, h, q, kv: ops.exp(s), "exp(score)"),
    (lambda s, b, h, q, kv: ops.exp2(s), "exp2(score)"),
    (lambda s, b, h, q, kv: ops.log(s), "log(score)"),
    (lambda s, b, h, q, kv: ops.log2(s), "log2(score)"),
    (lambda s, b, h, q, kv: ops.sqrt(s), "sqrt(score)"),
    (lambda s, b, h, q, kv: ops.rsqrt(s), "rsqrt(score)"),
    (lambda s, b, h, q, kv: ops.sigmoid(s), "sigmoid(score)"),
    (lambda s, b, h, q, kv: ops.sin(s), "sin(score)"),
    (lambda s, b, h, q, kv: ops.cos(s), "cos(score)"),
    (lambda s, b, h, q, kv: ops.tan(s), "tan(score)"),
    (lambda s, b, h, q, kv: ops.erf(s), "erf(score)"),
    (lambda s, b, h, q, kv: ops.floor(s), "floor(score)"),
    (lambda s, b, h, q, kv: ops.ceil(s), "ceil(score)"),
    (lambda s, b, h, q, kv: ops.abs(s), "abs(score)"),
    (lambda s, b, h, q, kv: ops.minimum(s, 1.0), "min(score, 1.0)"),
    (lambda s, b, h, q, kv: ops.maximum(s, q), "max(score, q_idx)"),
    (lambda s, b, h, q, kv: ops.clamp(s, -1.0, 1.0), "_t0 = where(score <= -1.0, -1.0, score);\nwhere(_t0 >= 1.0, 1.0, _t0)"),
    (lambda s, b, h, q, kv: ops.clamp(s, max=2.0), "where(score >= 2.0, 2.0, score)"),
    (lambda s, b, h, q, kv: ops.pow(s, 3), "score ** 3"),
    (lambda s, b, h, q, kv: ops.where(q >= kv, s, -float("inf")), "where(q_idx >= kv_idx, score, -inf)"),
    (lambda s, b, h, q, kv: s + (q - kv), "score + (q_idx - kv_idx)"),
    (lambda s, b, h, q, kv: s - (q - kv), "score - (q_idx - kv_idx)"),
    (lambda s, b, h, q, kv: (s + 1) * 2, "(score + 1) * 2"),
    (lambda s, b, h, q, kv: s * 2 + 1, "score * 2 + 1"),
    (lambda s, b, h, q, kv: (-s) ** 2, "(-score) ** 2"),
    (lambda s, b, h, q, kv: -(s ** 2), "-score ** 2"),
    (lambda s, b, h, q, kv: s ** -1, "score ** -1"),
    (lambda s, b, h, q, kv: (-2) ** s, "(-2) ** score"),
    (lambda s, b, h, q, kv: ops.cast(q, "float32") * s, "f32(q_idx) * score"),
    (lambda s, b, h, q, kv: s + ops.cast(q - kv, "int64"), "score + i64(q_idx - kv_idx)"),
    (lambda s, b, h, q, kv: ops.trunc(s), "where(score < 0, ceil(score), floor(score))"),
]

MASK_OPS = [
    (lambda b, h, q, kv: q >= kv, "q_idx >= kv_idx"),
    (lambda b, h, q, kv: q > kv, "q_idx > kv_idx"),
    (lambda b, h, q, kv: q <= kv, "q_idx <= kv_idx"),
    (lambda b, h, q, kv: q < kv, "q_idx < kv_idx"),
    (lambda b, h, q, kv: q == kv, "q_idx == kv_idx"),
    (lambda b, h, q, kv: q != kv, "q_idx != kv_idx"),
    (lambda b, h, q, kv: (q >= kv) & (q - kv < 4), "q_idx >= kv_idx && q_idx - kv_idx < 4"),
    (lambda b, h, q, kv: (q < 2) | (kv < 2), "q_idx < 2 || kv_idx < 2"),
    (lambda b, h, q, kv: ~(q < kv), "!(q_idx < kv_idx)"),
    (lambda b, h, q, kv: (q < 3) ^ (kv < 3), "(q_idx < 3) != (kv_idx < 3)"),
    (lambda b, h, q, kv: ((q < 2) | (kv < 2)) & (h == 1), "(q_idx < 2 || kv_idx < 2) && h == 1"),
    (lambda b, h, q, kv: q // 4 == kv // 4, "q_idx // 4 == kv_idx // 4"),
    (lambda b, h, q, kv: q % 3 == b, "q_idx % 3 == b"),
    (lambda b, h, q, kv: ops.logical_and(q >= kv, kv > 0), "q_idx >= kv_idx && kv_idx > 0"),
    (lambda b, h, q, kv: ops.logical_or(q == 0, kv == 0), "q_idx == 0 || kv_idx == 0"),
    (lambda b, h, q, kv: ops.logical_not(q == kv), "!(q_idx == kv_idx)"),
    (lambda b, h, q, kv: ops.logical_xor(q == 0, kv == 0), "(q_idx == 0) != (kv_idx == 0)"),
    (lambda b, h, q, kv: ops.cast(q % 2, "bool"), "bool(q_idx % 2)"),
    (lambda b, h, q, kv: ops.cast(q, "float32") / 2 > kv, "f32(q_idx) / 2 > kv_idx"),
    (lambda b, h, q, kv: q / 2 > kv, "q_idx / 2 > kv_idx"),
    # integers: & | ^ ~ << >> are bitwise, as in torch (natten's morton codes, bit-packed masks)
    (lambda b, h, q, kv: (q & 1) == 0, "bitwise_and(q_idx, 1) == 0"),
    (lambda b, h, q, kv: (q | kv) > 3, "bitwise_or(q_idx, kv_idx) > 3"),
    (lambda b, h, q, kv: (q ^ kv) == 2, "bitwise_or(q_idx, kv_idx) - bitwise_and(q_idx, kv_idx) == 2"),
    (lambda b, h, q, kv: ~q < -3, "-q_idx - 1 < -3"),
    (lambda b, h, q, kv: (q >> 1) == (kv >> 1), "bitwise_right_shift(q_idx, 1) == bitwise_right_shift(kv_idx, 1)"),
    (lambda b, h, q, kv: (q << 2) > kv, "bitwise_left_shift(q_idx, 2) > kv_idx"),
    (lambda b, h, q, kv: (1 << (q % 4)) & kv != 0, "bitwise_and(bitwise_left_shift(1, q_idx % 4), kv_idx) != 0"),
    (lambda b, h, q, kv: (((q | (q << 8)) & 0x00FF00FF) ^ kv) % 3 == 0,
     "_t0 = bitwise_and(bitwise_or(q_idx, bitwise_left_shift(q_idx, 8)), 16711935);\n"
     "(bitwise_or(_t0, kv_idx) - bitwise_and(_t0, kv_idx)) % 3 == 0"),
    (lambda b, h, q, kv: ops.bitwise_xor(ops.bitwise_and(q, 6), ops.bitwise_not(kv)) < ops.bitwise_right_shift(q, 1),
     "_t0 = bitwise_and(q_idx, 6);\n_t1 = -kv_idx - 1;\n"
     "bitwise_or(_t0, _t1) - bitwise_and(_t0, _t1) < bitwise_right_shift(q_idx, 1)"),
    (lambda b, h, q, kv: ops.bitwise_left_shift(q, 1) >= kv, "bitwise_left_shift(q_idx, 1) >= kv_idx"),
    (lambda b, h, q, kv: True & (q >= kv), "q_idx >= kv_idx"),
    (lambda b, h, q, kv: (q >= kv) | False, "q_idx >= kv_idx"),
    (lambda b, h, q, kv: True, "true"),
]


@pytest.mark.parametrize("mod,expected", SCORE_OPS, ids=[e for _, e in SCORE_OPS])
def test_score_op_text(mod, expected):
    assert text(mod) == expected


@pytest.mark.parametrize("mod,expected", MASK_OPS, ids=[e for _, e in MASK_OPS])
def test_mask_op_text(mod, expected):
    assert text(mod) == expected


# mods with a direct numpy meaning (flexattn.ops computes with numpy on arrays) and no integer overflow
@pytest.mark.parametrize("mod,expected", SCORE_OPS, ids=[e for _, e in SCORE_OPS])
def test_score_op_matches_direct_numpy_call(mod, expected):
    b, h, q, kv = grids()
    score = np.linspace(-3.0, 3.0, 2 * 3 * 7 * 9).reshape(2, 3, 7, 9) + 0.01
    traced = flexattn.trace(mod).evaluate(score=score, b=b, h=h, q_idx=q, kv_idx=kv)
    with np.errstate(all="ignore"):
        direct = mod(score, b, h, q, kv)
    np.testing.assert_allclose(np.broadcast_to(traced, score.shape), np.broadcast_to(direct, score.shape),
                               rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("mod,expected", MASK_OPS, ids=[e for _, e in MASK_OPS])
def test_mask_op_matches_direct_numpy_call(mod, expected):
    b, h, q, kv = grids()
    traced = flexattn.trace(mod).evaluate(b=b, h=h, q_idx=q, kv_idx=kv)
    direct = mod(b, h, q, kv)
    assert traced.dtype == np.bool_
    np.testing.assert_array_equal(np.broadcast_to(traced, (2, 3, 7, 9)), np.broadcast_to(direct, (2, 3, 7, 9)))


def test_numpy_ufuncs_and_functions_on_traced_values_are_traced():
    def mod(s, b, h, q, kv):
        return np.where(q >= kv, np.tanh(s) + np.maximum(s, 0.0), np.clip(s, -1.0, 1.0))

    assert text(mod) == ("_t0 = where(score <= -1.0, -1.0, score);\n"
                         "where(q_idx >= kv_idx, tanh(score) + max(score, 0.0), where(_t0 >= 1.0, 1.0, _t0))")


def test_python_methods_on_traced_values():
    mod = lambda s, b, h, q, kv: s.tanh().clamp(min=0.0) + (q - kv).float().abs()  # noqa: E731
    assert text(mod) == "_t0 = tanh(score);\nwhere(_t0 <= 0.0, 0.0, _t0) + abs(f32(q_idx - kv_idx))"
    assert text(lambda s, b, h, q, kv: s.where(q > kv, 0.0)) == "where(q_idx > kv_idx, score, 0.0)"


# ---- types (mirror src/ir/expr.cc: torch 0-d promotion with weak Python scalars) ----
@pytest.mark.parametrize("mod,expected", [
    (lambda s, b, h, q, kv: q + 1, "i32"),
    (lambda s, b, h, q, kv: q + 1.5, "f32"),
    (lambda s, b, h, q, kv: q / 2, "f32"),
    (lambda s, b, h, q, kv: q // 2, "i32"),
    (lambda s, b, h, q, kv: ops.cast(q, "int64") + kv, "i64"),
    (lambda s, b, h, q, kv: ops.where(q > kv, 1, 0), "i64"),
    (lambda s, b, h, q, kv: ops.where(q > kv, q, 0), "i32"),
    (lambda s, b, h, q, kv: ops.where(q > kv, 1.0, 0), "f32"),
    (lambda s, b, h, q, kv: ops.exp(q), "f32"),
    (lambda s, b, h, q, kv: ops.floor(q), "i32"),
    (lambda s, b, h, q, kv: (q > 1) + (kv > 1), "bool"),
    (lambda s, b, h, q, kv: (q > 1) * (kv > 1), "bool"),
    (lambda s, b, h, q, kv: (q > 1) + 1, "i64"),
    (lambda s, b, h, q, kv: ops.maximum(q > 1, kv > 2), "bool"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_value_types(mod, expected):
    r = flexattn.trace(lambda s, b, h, q, kv: mod(s, b, h, q, kv))
    node = r.root.args[0] if r.root.op == "cast" else r.root  # score_mods are cast to f32 at the end
    assert node.type == expected


def test_where_of_two_python_scalars_is_a_strong_tensor_like_torch():
    r = flexattn.trace(lambda s, b, h, q, kv: ops.where(q > kv, 1.0, 0.0) * s).root
    assert r.args[0].op == "cast" and not r.args[0].weak


def test_bool_arithmetic_maps_to_logic_like_torch():
    assert text(lambda b, h, q, kv: (q > 1) + (kv > 1)) == "q_idx > 1 || kv_idx > 1"
    assert text(lambda b, h, q, kv: (q > 1) * (kv > 1)) == "q_idx > 1 && kv_idx > 1"


def test_score_mod_returning_integers_is_cast_to_f32():
    assert text(lambda s, b, h, q, kv: q - kv) == "f32(q_idx - kv_idx)"
    assert text(lambda s, b, h, q, kv: 0) == "f32(0)"


# ---- literal spellings: exact, round-trippable ----
@pytest.mark.parametrize("value,expected", [
    (1e-05, "1e-05"), (0.1, "0.1"), (30.0, "30.0"), (1e16, "1e+16"), (-0.0, "-0.0"),
    (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"), (7, "7"), (-7, "-7"), (2**40, str(2**40)),
])
def test_literal_spellings(value, expected):
    assert print_text(python_literal(value)) == expected


def test_strong_literals_are_annotated():
    t = text(lambda s, b, h, q, kv: s * np.array(2.5, dtype=np.float32) + q * np.array(3, dtype=np.int32))
    assert t == "score * 2.5{f32} + q_idx * 3{i32}"


def test_negative_literal_operands_are_unambiguous():
    assert print_text(binary("sub", input_leaf("score"), python_literal(-3))) == "score - -3"
    assert print_text(binary("pow", python_literal(-3), input_leaf("score"))) == "(-3) ** score"


def test_shared_subexpressions_become_bindings():
    def mod(s, b, h, q, kv):
        d = q - kv
        return s + d * d

    assert text(mod) == "_t0 = q_idx - kv_idx;\nscore + _t0 * _t0"


def test_deep_chains_do_not_recurse():
    def mod(s, b, h, q, kv):
        for _ in range(5000):
            s = s + 1.0
        return s

    t = text(mod)
    assert t.startswith("score + 1.0 + 1.0") and t.count("1.0") == 5000


def test_identical_expressions_are_one_node():
    r = flexattn.trace(lambda s, b, h, q, kv: (q - kv) * (q - kv)).root
    mul = r.args[0]
    assert mul.args[0] is mul.args[1]


class _FakeSchema:
    def __init__(self, name):
        self.name = name


class _FakeOpOverload:
    """What torch passes to __torch_function__ for a torch.library custom op called on a traced value."""

    def __init__(self, qualified):
        self._schema = _FakeSchema(qualified)
        self.__name__ = qualified.split("::")[1] + ".default"


class _FakeOpPacket:
    def __init__(self, qualified):
        self._qualified_op_name = qualified
        self.__name__ = qualified.split("::")[1]


def test_attention_gym_approx_tanh_custom_op_traces_to_tanh_approx():
    # attention-gym's softcap(approx=True) calls torch.ops.approx.tanh; it arrives as an OpOverload or a packet.
    from flexattn._dispatch import dispatch_torch

    for func in (_FakeOpOverload("approx::tanh"), _FakeOpPacket("approx::tanh")):
        assert text(lambda s, b, h, q, kv, f=func: 30.0 * dispatch_torch(f, (s / 30.0,), {})) == \
            "30.0 * tanh_approx(score / 30.0)"


def test_unknown_custom_op_names_itself():
    from flexattn._dispatch import dispatch_torch

    with pytest.raises(Exception) as e:
        flexattn.trace(lambda s, b, h, q, kv: dispatch_torch(_FakeOpOverload("mylib::gelu"), (s,), {}))
    assert "torch.ops.mylib.gelu is not supported inside mods" in str(e.value)


def test_tanh_approx_on_numbers_and_arrays_is_tanh():
    x = np.linspace(-5, 5, 11)
    np.testing.assert_array_equal(ops.tanh_approx(x), np.tanh(x))
    assert ops.tanh_approx(0.5) == np.tanh(0.5)


@pytest.mark.parametrize("mod,expected", SCORE_OPS + MASK_OPS, ids=[e for _, e in SCORE_OPS + MASK_OPS])
def test_traced_text_reads_back_the_same_in_the_native_ir(mod, expected):
    # The Python printer and the C++ parser / printer agree on every op (the text is how a traced mod crosses).
    from flexattn import _native

    C = _native.load()
    if C is None:
        pytest.skip(f"flexattn._C not built: {_native.error()}")
    kind = "mask_mod" if mod.__code__.co_argcount == 4 else "score_mod"
    if expected == "true":
        pytest.skip("a constant mask_mod has no IR node to read back")
    native = C.Mod(expected, kind)
    if "_t0" not in expected:  # the two printers bind shared subexpressions by their own rules
        assert native.text == expected
    assert C.Mod(native.text, kind) == native


@pytest.mark.parametrize("approximate,expected", [
    ("none", "score * 0.5 * (1.0 + erf(score * 0.7071067811865476))"),
    ("tanh", "0.5 * score * (1.0 + tanh(0.7978845608028654 * (score + 0.044715 * (score * score * score))))"),
])
def test_gelu_is_torchs_formula(approximate, expected):
    # F.gelu inside a mod (attention-gym's activation mod: log(gelu(score) + offset)) reaches HANDLERS["gelu"].
    from flexattn._dispatch import HANDLERS

    traced = flexattn.trace(lambda s, b, h, q, kv: HANDLERS["gelu"](s, approximate=approximate))
    assert traced.text == expected
    x = np.linspace(-4.0, 4.0, 81)
    erf = np.vectorize(math.erf)
    want = (x * 0.5 * (1 + erf(x / math.sqrt(2))) if approximate == "none"
            else 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))
    got = traced.evaluate(score=x, b=0, h=0, q_idx=0, kv_idx=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_gelu_errors_name_the_problem():
    from flexattn._dispatch import HANDLERS

    with pytest.raises(flexattn.TraceError, match="gelu: approximate must be 'none' or 'tanh', got 'erf'"):
        flexattn.trace(lambda s, b, h, q, kv: HANDLERS["gelu"](s, approximate="erf"))
    with pytest.raises(flexattn.TraceError, match="gelu takes a float, got i32"):
        flexattn.trace(lambda s, b, h, q, kv: s + HANDLERS["gelu"](q))


def _aten_reference(op, x, y, bits):
    """ATen's integer bitwise ops on Python ints, wrapped to `bits` (independent of _eval.py's numpy code)."""
    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >> (bits - 1) else v
    if op == "and":
        return wrap(x & y)
    if op == "or":
        return wrap(x | y)
    if op == "xor":
        return wrap(x ^ y)
    if op == "shl":
        return 0 if y < 0 or y >= bits else wrap(x << y)
    return x >> (bits - 1 if y < 0 or y >= bits else y)  # shr: arithmetic


@pytest.mark.parametrize("op,fn", [("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b),
                                   ("shl", lambda a, b: a << b), ("shr", lambda a, b: a >> b)])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_bitwise_evaluation_follows_aten_on_negative_values_and_any_count(op, fn, dtype):
    # q - 40 spans negatives; 7 * kv - 10 spans counts from -10 past the bit width (ATen: 0 / the sign there).
    def mod(b, h, q, kv):
        return fn(ops.cast(q * 1234567 - 40, dtype), ops.cast(kv * 7 - 10, dtype)) > 0

    def value(b, h, q, kv):
        return fn(ops.cast(q * 1234567 - 40, dtype), ops.cast(kv * 7 - 10, dtype))

    bits = 32 if dtype == "int32" else 64
    q, kv = np.arange(0, 3000, 37)[:, None], np.arange(0, 14)[None, :]
    got = flexattn.trace(lambda b, h, q_, kv_: value(b, h, q_, kv_) == 0).evaluate(b=0, h=0, q_idx=q, kv_idx=kv)
    traced = flexattn.trace(mod).evaluate(b=0, h=0, q_idx=q, kv_idx=kv)
    for i in range(q.shape[0]):
        for j in range(kv.shape[1]):
            x = _aten_reference("and", int(q[i, 0]) * 1234567 - 40, -1, 32)  # q_idx * 1234567 wraps in i32
            want = _aten_reference(op, x, int(kv[0, j]) * 7 - 10, bits)
            assert bool(traced[i, j]) == (want > 0), (op, dtype, x, int(kv[0, j]) * 7 - 10)
            assert bool(got[i, j]) == (want == 0), (op, dtype, x, int(kv[0, j]) * 7 - 10)


def test_integer_literals_a_double_cannot_hold_are_refused():
    with pytest.raises(TypeError, match=r"integer literal 6148914691236517205 is not exact in the IR"):
        flexattn.trace(lambda b, h, q, kv: (ops.cast(q, "int64") & 0x5555555555555555) == 0)
    assert flexattn.trace(lambda b, h, q, kv: (ops.cast(q, "int64") & (1 << 53)) == 0).text == \
        "bitwise_and(i64(q_idx), 9007199254740992) == 0"


def test_python_ints_beyond_32_bits_widen_what_they_meet():
    """q_idx + 2**40 and hash multipliers (2654435761) wrapped in i32 without a word; Triton (torch's compiled
    flex_attention) and torch's eager path compute them in 64 bits: the i32 operand is cast to i64 in the IR."""
    mod = lambda s, b, h, q, kv: s + ((q + 2**40) % 7) + (q * 2654435761) % 1000 + (q < 2**33)  # noqa: E731
    assert text(mod) == "_t0 = i64(q_idx);\nscore + (_t0 + 1099511627776) % 7 + _t0 * 2654435761 % 1000 + (_t0 < 8589934592)"
    q = np.arange(5)
    got = flexattn.trace(mod).evaluate(score=np.zeros(5), q_idx=q)
    np.testing.assert_array_equal(got, [(i + 2**40) % 7 + (i * 2654435761) % 1000 + 1 for i in q])
    assert text(lambda s, b, h, q, kv: s + (q + (2**31 - 1))) == "score + (q_idx + 2147483647)"  # fits: stays i32
