"""Mods flexattn cannot trace fail with a message naming the mod, the file:line and the fix."""
import functools
import inspect
import math

import numpy as np
import pytest

import flexattn
from flexattn import TraceError, ops


def line_of(fn, marker):
    """Line number of the source line of `fn` containing `marker`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if marker in l)


def my_mod(score, b, h, q_idx, kv_idx):
    if score > 0:  # MARK-if
        return score
    return -score


def test_if_on_a_traced_value_names_mod_file_and_line():
    with pytest.raises(TraceError) as e:
        flexattn.trace(my_mod)
    line = line_of(my_mod, "MARK-if")
    msg = str(e.value)
    assert msg.startswith(f"data-dependent control flow in score_mod 'my_mod' at test_tracer_errors.py:{line}: "
                          "`if score > 0:  # MARK-if`")
    assert "torch.where" in msg and "& | ~" in msg
    assert e.value.mod_name == "my_mod" and e.value.lineno == line and e.value.filename.endswith(".py")


def test_python_and_or_not_and_chained_comparisons_are_control_flow():
    def uses_and(b, h, q, kv):
        return q >= kv and kv >= 0  # MARK-and

    def chained(b, h, q, kv):
        return 0 <= kv <= q  # MARK-chain

    def builtin_max(s, b, h, q, kv):
        return max(s, 0.0)  # MARK-max

    for fn, mark in ((uses_and, "MARK-and"), (chained, "MARK-chain"), (builtin_max, "MARK-max")):
        with pytest.raises(TraceError, match=rf"data-dependent control flow in \w+ '[\w.<>]*{fn.__name__}' at "
                                             rf"test_tracer_errors.py:{line_of(fn, mark)}"):
            flexattn.trace(fn)


def test_control_flow_inside_a_helper_points_at_the_helper_line():
    def helper(x):
        return x if x > 1 else 0  # MARK-helper

    def mod(b, h, q, kv):
        return helper(q) == kv
    with pytest.raises(TraceError, match=rf"mask_mod '.*mod' at test_tracer_errors.py:{line_of(helper, 'MARK-helper')}"):
        flexattn.trace(mod)


def test_math_functions_and_python_numbers():
    with pytest.raises(TraceError, match=r"a traced value used as a Python float in score_mod .* math\.tanh"):
        flexattn.trace(lambda s, b, h, q, kv: math.tanh(s))
    with pytest.raises(TraceError, match="used as a Python int"):
        flexattn.trace(lambda s, b, h, q, kv: s + int(q))


def test_indexing_an_uncaptured_array_explains_how_to_capture_it():
    class Holder:
        table = np.zeros(8)
    obj = Holder()
    with pytest.raises(TraceError, match="must be captured directly"):
        flexattn.trace(lambda s, b, h, q, kv: s + obj.table[q])


def test_python_list_indexed_by_a_traced_value():
    slopes = [0.5, 0.25]
    with pytest.raises(TraceError, match="used as a Python int"):
        flexattn.trace(lambda s, b, h, q, kv: s * slopes[h])


@pytest.mark.parametrize("fn,pattern", [
    (lambda s, b, h, q, kv: s - (q > kv) - (q > kv) * 0 + ((q > 1) - (kv > 1)), "subtraction of two bools"),
    (lambda s, b, h, q, kv: (s & 1) + s, r"`&` on f32 and i64 \(python scalar\): bitwise operations take integers or "
                                         r"bools \(torch refuses floats too\)"),
    (lambda s, b, h, q, kv: s + (s | q), "`|` on f32 and i32: bitwise operations take integers"),
    (lambda s, b, h, q, kv: s + (q << s), "`<<` on i32 and f32: bitwise operations take integers"),
    (lambda s, b, h, q, kv: s + ~s, "`~` on f32: bitwise not takes an integer or a bool"),
    (lambda s, b, h, q, kv: abs(q > kv) + s, "'abs' is not defined for bool"),
    (lambda s, b, h, q, kv: ops.where(s, s, 0.0), "where: the condition must be bool, got f32"),
    (lambda s, b, h, q, kv: s.half(), "casts to float16 are not supported inside mods"),
    (lambda s, b, h, q, kv: -(q > kv) + s, "'neg' is not defined for bool"),
])
def test_type_errors_name_the_operation(fn, pattern):
    with pytest.raises(TraceError, match=r"type error in \w+_mod '.*<lambda>' at test_tracer_errors.py:\d+: .*"
                                         + pattern):
        flexattn.trace(fn)


def test_unsupported_method_is_an_attribute_error_with_location():
    with pytest.raises(AttributeError, match=r"unsupported operation '.softplus\(\)' on a traced value in score_mod"):
        flexattn.trace(lambda s, b, h, q, kv: s.softplus())
    with pytest.raises(TraceError, match="numpy.arctan is not supported inside mods in score_mod .* -- supported: .*tanh"):
        flexattn.trace(lambda s, b, h, q, kv: np.arctan(s))


def test_buffer_misuse():
    bias = np.zeros((2, 3), np.float32)
    big = np.zeros((1, 1, 1, 1, 2), np.float32)
    cases = [
        (lambda s, b, h, q, kv: s + bias, "captured tensor 'bias' used without indexing"),
        (lambda s, b, h, q, kv: s + bias[h, q, kv], "too many indices for captured tensor 'bias'"),
        (lambda s, b, h, q, kv: s + bias[::-1, q], r"slice slice\(None, None, -1\) of captured tensor 'bias'.*the step "
                                                    "must be positive"),
        (lambda s, b, h, q, kv: s + bias[h, q:], r"slice .* of captured tensor 'bias'.*slice bounds must be Python ints"),
        (lambda s, b, h, q, kv: s + bias[h, 5:], r"slice slice\(5, None, None\) of captured tensor 'bias' is empty"),
        (lambda s, b, h, q, kv: s + bias[None, h, q], r"unsupported index None into captured tensor 'bias'"),
        (lambda s, b, h, q, kv: s + bias[h, s], "index 1 must be an integer, got f32"),
        (lambda s, b, h, q, kv: s + big[0, 0, 0, 0, q], "captured tensor 'big' has 5 dimensions"),
        (lambda s, b, h, q, kv: np.tanh(bias), "applied to a whole captured tensor|used without indexing"),
    ]
    for fn, pattern in cases:
        with pytest.raises(TraceError, match=pattern):
            flexattn.trace(fn)


def test_mutation_and_iteration_are_refused():
    def mutate(s, b, h, q, kv):
        s[0] = 1.0
        return s
    with pytest.raises(TraceError, match="in-place mutation inside a mod"):
        flexattn.trace(mutate)
    with pytest.raises(TraceError, match="iteration over a traced value"):
        flexattn.trace(lambda s, b, h, q, kv: sum(s))


def test_mask_mod_must_return_bool_and_mods_one_value():
    with pytest.raises(TraceError, match=r"mask_mod '.*<lambda>' must return a bool \(True = attend\), it returns "
                                         "i32; compare it"):
        flexattn.trace(lambda b, h, q, kv: q - kv)
    with pytest.raises(TraceError, match="returned None"):
        flexattn.trace(lambda b, h, q, kv: None)
    with pytest.raises(TraceError, match="returned tuple"):
        flexattn.trace(lambda s, b, h, q, kv: (s, s))


def test_exceptions_from_user_code_propagate_with_a_note():
    def bad(s, b, h, q, kv):
        raise KeyError("boom")
    with pytest.raises(KeyError) as e:
        flexattn.trace(bad)
    notes = getattr(e.value, "__notes__", ["flexattn traced score_mod"])
    assert "flexattn traced score_mod" in notes[0]


# ---- 4- vs 5-argument detection ----
def test_mod_kind_counts_positional_parameters_without_defaults():
    assert flexattn.mod_kind(lambda s, b, h, q, kv: s) == "score_mod"
    assert flexattn.mod_kind(lambda b, h, q, kv: q >= kv) == "mask_mod"
    assert flexattn.mod_kind(lambda s, b, h, q, kv, extra=1.0: s) == "score_mod"
    assert flexattn.mod_kind(lambda b, h, q, kv, *, window=4: q >= kv) == "mask_mod"
    assert flexattn.mod_kind(functools.partial(lambda s, b, h, q, kv, c: s * c, c=2.0)) == "score_mod"
    assert flexattn.mod_kind(functools.partial(lambda c, b, h, q, kv: q >= c, 3)) == "mask_mod"
    assert flexattn.mod_kind(flexattn.noop_mask) == "mask_mod"


def test_wrong_parameter_count_is_a_clear_type_error():
    def three(b, q, kv):
        return q >= kv
    with pytest.raises(TypeError, match=r"mod '.*three' takes 3 positional parameters without defaults; a "
                                        r"score_mod takes 5 \(score, b, h, q_idx, kv_idx\) and a mask_mod 4"):
        flexattn.trace(three)
    with pytest.raises(TypeError, match="a mod must be callable, got int"):
        flexattn.mod_kind(3)


def test_expected_kind_is_enforced():
    with pytest.raises(TypeError, match="expected a mask_mod, got score_mod"):
        flexattn.trace(lambda s, b, h, q, kv: s, kind="mask_mod")


def test_a_per_position_integer_to_a_negative_power_is_refused_as_in_torch():
    with pytest.raises(TraceError, match=r"integers to negative integer powers are not allowed.*q_idx.float\(\) \*\* -1"):
        flexattn.trace(lambda s, b, h, q_idx, kv: s * q_idx ** -1)
    assert flexattn.trace(lambda s, b, h, q_idx, kv: s * q_idx.float() ** -1).text == "score * f32(q_idx) ** -1"
