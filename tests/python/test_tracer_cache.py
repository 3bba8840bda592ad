"""The trace cache against what mods read through objects: a cached trace must never keep a value that changed
(numbers read through self / configs / user modules, classes, enums, globals() lookups), and bound-method mods
are cached by the reads recorded through `self` (flexattn/_self_reads.py). Split from test_tracer_capture.py."""
import functools
import math

import numpy as np
import pytest

import flexattn


def test_cache_does_not_keep_opaque_objects_alive():
    import gc
    import weakref

    class Cfg:
        scale = 2.0

        def mod(self, score, b, h, q_idx, kv_idx):
            return score * self.scale

    cfg = Cfg()
    flexattn.trace(cfg.mod)
    assert flexattn.trace(cfg.mod).cached  # cached under the reads the trace made through self (_self_reads)
    ref = weakref.ref(cfg)
    del cfg
    gc.collect()
    assert ref() is None


def test_numbers_read_through_objects_and_user_modules_are_read_again_each_call():
    """A cached trace kept the first call's attribute values: after cfg.scale = 3.0 (or an nn.Module's window, or a
    user module's global) the old constant was used without a word. Such traces are not cached; classes, dtypes and
    library modules still are."""
    import types as _types

    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 0.5
    user_module = _types.ModuleType("user_cfg")
    user_module.W = 3

    def scaled(score, b, h, q_idx, kv_idx):
        return score * cfg.scale

    def band(b, h, q_idx, kv_idx):
        return abs(q_idx - kv_idx) <= user_module.W

    assert "0.5" in flexattn.trace(scaled).text
    cfg.scale = 3.0
    t = flexattn.trace(scaled)
    assert "3.0" in t.text and not t.cached
    assert "3" in flexattn.trace(band).text
    user_module.W = 10
    assert "10" in flexattn.trace(band).text

    dtype = np.float32

    def typed(score, b, h, q_idx, kv_idx):
        return score * dtype(2)

    flexattn.trace(typed)
    assert flexattn.trace(typed).cached  # a class is taken as unchanging


def test_traces_through_objects_follow_every_change_they_read():
    """Mods that read numbers through objects are traced on every call: a cache keyed on a summary of the objects
    (session 39, reverted) missed changes in review after review; each of these changes must show."""
    import functools
    import types as _types

    user_module = _types.ModuleType("user_cfg_fp")
    user_module.W = 3

    def helper_global():
        return user_module.W

    class Inner:
        def __init__(self):
            self.window = 4

    class Layer:
        shift = 1.0  # a class attribute, read as self.shift

        def __init__(self):
            self.scale, self.inner, self.act = 0.5, Inner(), abs
            self.table = (1, 2, 3)
            self.part = functools.partial(min, 7)

        def helper(self):
            return helper_global()

        def mod(self, score, b, h, q_idx, kv_idx):
            return (self.act(score) * self.scale + self.shift + self.inner.window + self.table[1] + self.helper()
                    + self.part(100) + 0 * q_idx)

    layer = Layer()

    def value():
        t = flexattn.trace(layer.mod)
        return float(t.evaluate(score=-2.0)), t.cached

    want = 2 * 0.5 + 1.0 + 4 + 2 + 3 + 7
    assert value() == (want, False) and value() == (want, False)
    changes = [
        (lambda: setattr(layer, "scale", 2.0), 4 * 1.0 - 2 * 0.5),        # an attribute
        (lambda: setattr(Layer, "shift", 5.0), 4.0),                     # a class attribute
        (lambda: setattr(layer.inner, "window", 40), 36),                # an attribute of an attribute
        (lambda: setattr(layer, "act", lambda x: -x), 0.0),              # the same value: -(-2) == abs(-2)
        (lambda: setattr(layer, "table", (1, 20, 3)), 18),               # a tuple's item
        (lambda: setattr(user_module, "W", 30), 27),                     # a global a method's helper reads
        (lambda: setattr(layer, "part", functools.partial(min, 9)), 2),  # a partial's argument
    ]
    for change, delta in changes:
        change()
        want += delta
        got, cached = value()
        assert got == want and not cached


def _stale_cases():
    """(label, make() -> (mod, change)) for the review's stale-trace cases: each reads a value through objects in a way
    the cache's summary (_fingerprint) must either describe or refuse."""
    import collections
    import functools
    import math
    import types as _types

    cases = []

    def case(fn):
        cases.append((fn.__name__, fn))
        return fn

    class Holder:
        pass

    @case
    def namedtuple_field():
        Cfg = collections.namedtuple("Cfg", "cap")
        h = Holder()
        h.cfg = Cfg(30.0)
        return (lambda s, b, hh, q, kv: s * h.cfg.cap), lambda: setattr(h, "cfg", Cfg(2.0))

    @case
    def dict_subclass_item():
        class AttrDict(dict):
            __getattr__ = dict.__getitem__
        h = Holder()
        h.cfg = AttrDict(cap=30.0)
        return (lambda s, b, hh, q, kv: s * h.cfg.cap), lambda: h.cfg.__setitem__("cap", 2.0)

    @case
    def numpy_array_item():
        h = Holder()
        h.slopes = np.array([1.0, 1.0])
        return (lambda s, b, hh, q, kv: s * h.slopes[1]), lambda: h.slopes.__setitem__(1, 3.0)

    @case
    def four_levels_deep():
        h = Holder()
        h.a = Holder()
        h.a.b = Holder()
        h.a.b.c = Holder()
        h.a.b.c.cap = 30.0
        return (lambda s, b, hh, q, kv: s * h.a.b.c.cap), lambda: setattr(h.a.b.c, "cap", 2.0)

    @case
    def property_reading_a_global_object():
        config = _types.SimpleNamespace(cap=30.0)

        class P:
            @property
            def cap(self):
                return config.cap
        p = P()
        return (lambda s, b, hh, q, kv: s * p.cap), lambda: setattr(config, "cap", 2.0)

    @case
    def class_attribute_of_a_class_attribute():
        class K:
            cap = 30.0
        h = Holder()
        h.k = K
        return (lambda s, b, hh, q, kv: s * h.k.cap), lambda: setattr(K, "cap", 2.0)

    @case
    def partial_as_class_attribute():
        class C:
            scale = functools.partial(min, 3.0)
        c = C()
        return (lambda s, b, hh, q, kv: s * c.scale(5.0)), lambda: setattr(C, "scale", functools.partial(min, 2.0))

    @case
    def getattr_hook():
        table = {"cap": 30.0}

        class Lazy:
            def __getattr__(self, n):
                return table[n]
        lz = Lazy()
        return (lambda s, b, hh, q, kv: s * lz.cap), lambda: table.__setitem__("cap", 2.0)

    @case
    def slot_in_a_base_class():
        class Base:
            __slots__ = ("cap",)

        class Sub(Base):
            pass
        sl = Sub()
        sl.cap = 30.0
        return (lambda s, b, hh, q, kv: s * sl.cap), lambda: setattr(sl, "cap", 2.0)

    @case
    def negative_zero():
        h = Holder()
        h.z = 0.0
        return (lambda s, b, hh, q, kv: s * math.copysign(1.0, h.z)), lambda: setattr(h, "z", -0.0)

    return cases


@pytest.mark.parametrize("label,make", _stale_cases())
def test_a_cached_trace_never_keeps_a_value_read_through_objects_after_it_changes(label, make):
    """Each case reads a value through objects in a way a summary of the objects could miss (found in review): the
    cache must describe the change or not cache such a trace; either way the value after the change is the fresh one."""
    mod, change = make()
    flexattn.trace(mod)
    flexattn.trace(mod)
    change()
    got = float(flexattn.trace(mod).evaluate(score=1.0))
    flexattn.clear_cache()
    assert got == float(flexattn.trace(mod).evaluate(score=1.0)), label


def test_a_trace_that_reads_an_attribute_tensors_value_is_not_cached():
    torch = pytest.importorskip("torch")

    class Holder:
        pass

    h = Holder()
    h.cap = torch.tensor(30.0)

    def mod(s, b, hh, q, kv):
        return s * h.cap.item()

    flexattn.trace(mod)
    assert not flexattn.trace(mod).cached
    h.cap.fill_(2.0)
    assert float(flexattn.trace(mod).evaluate(score=1.0)) == 2.0


class _ClassCap:
    cap = 30.0


def test_a_class_a_bound_builtin_method_or_a_function_attribute_the_mod_reads_follow_their_changes():
    """Found in review: a user class (K.cap), a dict's bound method (get = cfg.get) and a function's own attribute
    (helper.k) were taken as unchanging, so a cached trace kept the first value."""
    cfg = {"cap": 30.0}
    get = cfg.get

    def helper(x):
        return x * helper.k

    helper.k = 3.0
    cases = [
        (lambda s, b, h, q, kv: s * _ClassCap.cap, lambda: setattr(_ClassCap, "cap", 2.0)),
        (lambda s, b, h, q, kv: s * get("cap"), lambda: cfg.__setitem__("cap", 2.0)),
        (lambda s, b, h, q, kv: helper(s), lambda: setattr(helper, "k", 2.0)),
    ]
    for mod, change in cases:
        flexattn.trace(mod)
        flexattn.trace(mod)
        change()
        assert float(flexattn.trace(mod).evaluate(score=1.0)) == 2.0
    _ClassCap.cap = 30.0


_HELPER_SCALE = 2.0


class _Inner:
    def __init__(self):
        self.window = 4


class _Recorded:
    shift = 1.0

    def __init__(self):
        self.scale, self.inner, self.neg = 0.5, _Inner(), 0.0

    def helper(self):
        return _HELPER_SCALE * self.scale

    def mod(self, score, b, h, q_idx, kv_idx):
        extra = getattr(self, "extra", 0.0)
        return (score * self.helper() + self.shift + self.inner.window + extra
                + math.copysign(1.0, self.neg) + 0 * q_idx)


def test_bound_method_traces_are_cached_while_every_read_through_self_gives_the_same():
    """A bound method reading self.x was traced on every call (~0.25 ms). Its trace now runs with `self` recorded
    (_self_reads): the cached trace is reused when every read gives the same result again, and each change here
    (an attribute, a class attribute, an attribute of an attribute, a global a helper method reads, an attribute
    that appears, -0.0) traces again."""
    global _HELPER_SCALE
    obj = _Recorded()

    def value():
        t = flexattn.trace(obj.mod)
        return float(t.evaluate(score=1.0)), t.cached

    want = 2.0 * 0.5 + 1.0 + 4 + 0.0 + 1.0
    assert value() == (want, False) and value() == (want, True)
    changes = [
        (lambda: setattr(obj, "scale", 2.0), 3.0),
        (lambda: setattr(_Recorded, "shift", 5.0), 4.0),
        (lambda: setattr(obj.inner, "window", 40), 36),
        (lambda: globals().__setitem__("_HELPER_SCALE", 3.0), 2.0),
        (lambda: setattr(obj, "extra", 7.0), 7.0),
        (lambda: setattr(obj, "neg", -0.0), -2.0),
    ]
    try:
        for change, delta in changes:
            change()
            want += delta
            assert value() == (want, False)
            assert value() == (want, True)
    finally:
        _Recorded.shift, _HELPER_SCALE = 1.0, 2.0


def test_bound_method_traces_that_read_what_the_log_cannot_replay_are_not_cached():
    torch = pytest.importorskip("torch")

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.temp = torch.nn.Parameter(torch.tensor(2.0))
            self.cap = 3.0

        @property
        def doubled(self):
            return self.cap * 2

        def by_property(self, s, b, h, q, kv):
            return s * self.doubled

        def by_tensor(self, s, b, h, q, kv):
            return s * self.temp

        def by_assignment(self, s, b, h, q, kv):
            self.seen = True
            return s * self.cap

    layer = Layer()
    for mod in (layer.by_property, layer.by_tensor, layer.by_assignment):
        flexattn.trace(mod)
        assert not flexattn.trace(mod).cached
    layer.cap = 5.0
    assert float(flexattn.trace(layer.by_property).evaluate(score=1.0)) == 10.0


def _recorder_cases():
    """The third review's cases against the recorded reads: each mod depends on something a log of attribute reads
    through `self` could miss; a change must show in the next trace."""
    import enum

    cases = []

    def case(fn):
        cases.append((fn.__name__, fn))
        return fn

    @case
    def through_dunder_class():
        class M:
            SCALE = 2.0

            def mod(self, s, b, h, q, kv):
                return s * self.__class__.SCALE
        m = M()
        return m.mod, lambda: setattr(M, "SCALE", 5.0)

    @case
    def identity_of_two_attributes():
        class A:
            w = 2.0

        class M:
            def __init__(self):
                self.a, self.b = A(), A()

            def mod(self, s, b, h, q, kv):
                return s * (self.a.w if self.a is self.b else 9.0)
        m = M()
        return m.mod, lambda: setattr(m, "b", m.a)

    @case
    def self_also_a_global():
        class M:
            def __init__(self):
                self.cap = 2.0

            def mod(self, s, b, h, q, kv):
                return s * _RECORDER_GLOBAL[0].cap
        m = M()
        _RECORDER_GLOBAL[:] = [m]
        return m.mod, lambda: setattr(m, "cap", 5.0)

    @case
    def enum_member_with_a_method():
        table = {"A": 2.0}

        class Mode(enum.Enum):
            A = 1

            def factor(self):
                return table[self.name]

        class M:
            def __init__(self):
                self.mode = Mode.A

            def mod(self, s, b, h, q, kv):
                return s * self.mode.factor()
        m = M()
        return m.mod, lambda: table.__setitem__("A", 7.0)

    @case
    def helper_code_swapped():
        class M:
            def helper(self):
                return 2.0

            def mod(self, s, b, h, q, kv):
                return s * self.helper()

        def other(self):
            return 5.0
        m = M()
        return m.mod, lambda: setattr(M.helper, "__code__", other.__code__)

    @case
    def module_tables_on_a_plain_object():
        class Reg:
            def __init__(self):
                self._buffers = {"w": 5.0}
                self.k = 1.0

            def mod(self, s, b, h, q, kv):
                return s * getattr(self, "w", self.k)
        r = Reg()
        return r.mod, lambda: setattr(r, "k", 3.0)

    @case
    def enum_member_with_a_list_value():
        class Mode(enum.Enum):
            A = [2.0]

        class M:
            def __init__(self):
                self.mode = Mode.A

            def mod(self, s, b, h, q, kv):
                return s * self.mode.value[0]
        m = M()
        return m.mod, lambda: Mode.A.value.__setitem__(0, 5.0)

    @case
    def globals_read_by_a_helper():
        class M:
            def helper(self):
                return globals()["_RECORDER_SCALE"]

            def mod(self, s, b, h, q, kv):
                return s * self.helper()
        globals()["_RECORDER_SCALE"] = 2.0
        return M().mod, lambda: globals().__setitem__("_RECORDER_SCALE", 5.0)

    @case
    def identity_of_two_lists():
        class M:
            def __init__(self):
                self.a = [1.0]
                self.b = self.a

            def mod(self, s, b, h, q, kv):
                return s * (2.0 if self.a is self.b else 7.0)
        m = M()
        return m.mod, lambda: setattr(m, "b", [1.0])

    @case
    def callable_of_an_attribute():
        class C:
            pass

        class M:
            def __init__(self):
                self.c = C()

            def mod(self, s, b, h, q, kv):
                return s * (3.0 if callable(self.c) else 2.0)
        m = M()
        return m.mod, lambda: setattr(m, "c", abs)

    @case
    def an_object_with_an_elementwise_eq():
        class M:
            def __init__(self):
                self.w, self.arr = 2.0, np.zeros(3)

            def __eq__(self, other):
                return self.arr == other.arr
            __hash__ = object.__hash__

            def mod(self, s, b, h, q, kv):
                self.seen = 1
                return s * self.w
        m = M()
        return m.mod, lambda: setattr(m, "w", 5.0)

    return cases


_RECORDER_GLOBAL = []


def test_a_recorded_trace_leaves_no_stand_in_in_the_users_object():
    class Cfg:
        w = 2.0

    class M:
        def __init__(self):
            self.cfg = Cfg()

        def mod(self, s, b, h, q, kv):
            if getattr(self, "_c", None) is None:
                self._c = self.cfg
            return s * self._c.w
    m = M()
    flexattn.trace(m.mod)
    assert m._c is m.cfg


@pytest.mark.parametrize("label,make", _recorder_cases())
def test_recorded_reads_never_keep_a_trace_after_what_it_depends_on_changes(label, make):
    mod, change = make()
    # the mod run by Python on numbers, with the real self, is what every trace must give
    assert float(flexattn.trace(mod).evaluate(score=1.0)) == mod(1.0, 0, 0, 0, 0), label
    assert float(flexattn.trace(mod).evaluate(score=1.0)) == mod(1.0, 0, 0, 0, 0), label
    change()
    assert float(flexattn.trace(mod).evaluate(score=1.0)) == mod(1.0, 0, 0, 0, 0), label


def test_a_mod_that_looks_at_its_selfs_type_is_traced_with_the_real_self():
    class M2:
        def mod(self, s, b, h, q, kv):
            return s * (2.0 if type(self).__name__ == "M2" else 1.0)

    assert flexattn.trace(M2().mod).text == "score * 2.0"


def test_plain_closures_follow_enum_values_and_globals_lookups():
    """Found in review (older than the recorded reads): an enum captured by a plain function was taken as unchanging
    even with a list value changed in place, and a globals()["X"] lookup was a constant of a cached trace."""
    import enum

    class Listy(enum.Enum):
        A = [2.0]

    def by_enum(s, b, h, q, kv):
        return s * Listy.A.value[0]

    globals()["_GLOBALS_SCALE"] = 2.0

    def by_globals(s, b, h, q, kv):
        return s * globals()["_GLOBALS_SCALE"]

    for mod, change in ((by_enum, lambda: Listy.A.value.__setitem__(0, 5.0)),
                        (by_globals, lambda: globals().__setitem__("_GLOBALS_SCALE", 5.0))):
        flexattn.trace(mod)
        flexattn.trace(mod)
        change()
        assert float(flexattn.trace(mod).evaluate(score=1.0)) == 5.0


def test_an_int_enum_captured_in_a_closure_is_itself():
    """An IntEnum member captured by a closure became an int runtime scalar, so `mode is Kind.SLIDING` was never
    true (and a StrEnum member shared a cache key with the equal plain string)."""
    import enum

    class Kind(enum.IntEnum):
        SLIDING, FULL = 1, 2

    def make(mode):
        def score(s, b, h, qi, kv):
            return s * 2.0 if mode is Kind.SLIDING else s
        return score

    assert flexattn.trace(make(Kind.SLIDING)).text == "score * 2.0"
    assert flexattn.trace(make(Kind.FULL)).text == "score"
    assert flexattn.trace(make(1)).text == "score"
