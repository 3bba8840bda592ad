"""The numpy interpreter follows src/ir/eval.cc exactly on the corner cases the IR defines."""
import math

import numpy as np
import pytest

from flexattn import _ir
from flexattn._eval import evaluate

Q = _ir.input_leaf("q_idx")
SCORE = _ir.input_leaf("score")


def lit(v, t="i64", weak=True):
    return _ir.literal(v, t, weak)


def ev(node, **env):
    env.setdefault("scalars", {})
    env.setdefault("buffers", {})
    return evaluate(node, env)


def test_int32_arithmetic_wraps():
    n = _ir.binary("add", Q, lit(1))
    assert n.type == "i32"
    assert ev(n, q_idx=np.array(2**31 - 1)) == -(2**31)
    assert ev(_ir.binary("mul", Q, lit(65536)), q_idx=np.array(65536)) == 0


@pytest.mark.parametrize("a,b,fd,md", [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1),
                                       (5, 0, 0, 0), (-(2**31), -1, -(2**31), 0)])
def test_integer_floordiv_and_mod_are_python_style_and_total(a, b, fd, md):
    assert ev(_ir.binary("floordiv", Q, _ir.literal(b, "i32", False)), q_idx=np.array(a)) == fd
    assert ev(_ir.binary("mod", Q, _ir.literal(b, "i32", False)), q_idx=np.array(a)) == md


def test_float_floordiv_mod_like_torch():
    s = np.array([7.5, -7.5, 7.5, 0.0])
    d = _ir.literal(2.0, "f32", True)
    np.testing.assert_array_equal(ev(_ir.binary("floordiv", SCORE, d), score=s), [3.0, -4.0, 3.0, 0.0])
    np.testing.assert_array_equal(ev(_ir.binary("mod", SCORE, lit(-2.0, "f32")), score=s), [-0.5, -1.5, -0.5, 0.0])
    assert ev(_ir.binary("floordiv", SCORE, lit(0.0, "f32")), score=np.array(1.0)) == math.inf


def test_integer_pow_with_negative_exponent():
    e = _ir.literal(-1, "i32", False)
    got = ev(_ir.binary("pow", Q, e), q_idx=np.array([1, -1, 2, 0]))
    np.testing.assert_array_equal(got, [1, -1, 0, 0])
    np.testing.assert_array_equal(ev(_ir.binary("pow", Q, lit(-2)), q_idx=np.array([-1, 3])), [1, 0])


def test_float_to_int_casts_truncate_saturate_and_map_nan_to_zero():
    c = _ir.cast(SCORE, "i32")
    got = ev(c, score=np.array([2.7, -2.7, 1e20, -1e20, math.nan, math.inf]))
    np.testing.assert_array_equal(got, [2, -2, 2**31 - 1, -(2**31), 0, 2**31 - 1])
    c64 = _ir.cast(SCORE, "i64")
    assert ev(c64, score=np.array(1e30)) == 2**63 - 1


def test_loads_wrap_negative_indices_once_then_clamp():
    buf = np.array([10.0, 11.0, 12.0, 13.0], np.float32)
    n = _ir.load("buf", "f32", [Q])
    got = ev(n, q_idx=np.array([-1, -4, -9, 0, 3, 99]), buffers={"buf": buf})
    np.testing.assert_array_equal(got, [13.0, 10.0, 10.0, 10.0, 13.0, 13.0])


def test_minimum_maximum_propagate_nan_and_comparisons_with_nan_are_false():
    nan = np.array(math.nan)
    assert math.isnan(ev(_ir.binary("min", SCORE, lit(1.0, "f32")), score=nan))
    assert not ev(_ir.binary("lt", SCORE, lit(1.0, "f32")), score=nan)
    assert ev(_ir.binary("ne", SCORE, SCORE), score=nan)


def test_scalars_are_converted_to_their_type():
    s = _ir.scalar("off", "i32")
    assert ev(_ir.binary("add", Q, s), q_idx=np.array(1), scalars={"off": 2**32 + 5}) == 6
    f = _ir.scalar("alpha", "f32")
    assert ev(_ir.binary("mul", SCORE, f), score=np.array(2.0), scalars={"alpha": 3}) == 6.0


def test_select_converts_both_branches():
    n = _ir.select(_ir.binary("gt", Q, lit(0)), Q, lit(2.5, "f32"))
    assert n.type == "f32"
    np.testing.assert_array_equal(ev(n, q_idx=np.array([3, -1])), [3.0, 2.5])


def test_promotion_matches_the_cpp_rules():
    i64 = _ir.cast(Q, "i64")
    assert _ir.promote(Q, i64) == ("i64", False)
    assert _ir.promote(Q, lit(1)) == ("i32", False)
    assert _ir.promote(Q, lit(1.0, "f32")) == ("f32", False)
    assert _ir.promote(lit(1), lit(True, "bool")) == ("i64", True)
    assert _ir.promote(lit(1), lit(2)) == ("i64", True)
    assert _ir.promote(_ir.literal(True, "bool", False), lit(3)) == ("i64", False)
