"""The state of the trace in progress, and TraceError: every tracing failure names the mod and the line
of user code that caused it."""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_local = threading.local()


class TraceError(RuntimeError):
    """A mod could not be traced. `mod_name`, `filename`, `lineno` locate the cause."""

    def __init__(self, message, mod_name=None, filename=None, lineno=None):
        super().__init__(message)
        self.mod_name, self.filename, self.lineno = mod_name, filename, lineno


class TraceAttributeError(TraceError, AttributeError):
    """An unsupported attribute of a traced value (also an AttributeError, so hasattr() stays False)."""


class TraceContext:
    def __init__(self, kind: str, mod_name: str, scalar_values: dict):
        self.kind = kind  # "score_mod" or "mask_mod"
        self.mod_name = mod_name
        self.scalar_values = scalar_values  # scalar name -> value at trace time (for specialisation)
        self.guards = []  # (node, value): scalar-only expressions the trace specialised on
        self.extra_buffers = {}  # name -> tensor reached outside the captured names (not cacheable)
        # 0-d tensors the mod made from Python values while tracing (torch.tensor(2.0), torch.finfo(...).min): constants.
        # Any other 0-d tensor it meets came from outside (an attribute): a buffer, bound per call. Held, so ids stay.
        self.made = {}
        self.extra_origin = {}  # extra buffer name -> the object the mod reached (the 0-d tensor of a 1-element view)
        self.names = set()  # scalar and buffer names in use
        # scalar names captured from Python numbers (not 0-d tensors): torch treats the two apart (clamp's gradient
        # at its bound, an int to a negative power)
        self.python_numbers = set()

    def unique_name(self, hint: str) -> str:
        name, k = hint, 1
        while name in self.names:
            k += 1
            name = f"{hint}_{k}"
        self.names.add(name)
        return name


def current():
    return getattr(_local, "ctx", None)


@contextlib.contextmanager
def tracing(ctx: TraceContext):
    prev = current()
    _local.ctx = ctx
    try:
        yield ctx
    finally:
        _local.ctx = prev


def _library_dirs():
    dirs = [_PACKAGE_DIR]
    for name in ("torch", "numpy"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(os.path.abspath(mod.__file__)))
    return tuple(d + os.sep for d in dirs)


def user_location():
    """(filename, lineno, source line) of the innermost frame outside flexattn, torch and numpy."""
    skip = _library_dirs()
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(skip) and not fn.startswith("<frozen"):
            return fn, f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return None, None, ""


def fail(headline: str, detail: str = "", cls=TraceError):
    """Raises `cls` as "<headline> in score_mod 'name' at file.py:12: `line` -- detail"."""
    ctx = current()
    fn, line, src = user_location()
    where = ""
    if ctx is not None:
        where += f" in {ctx.kind} '{ctx.mod_name}'"
    if fn is not None:
        where += f" at {os.path.basename(fn)}:{line}"
    msg = headline + where
    if src:
        msg += f": `{src}`"
    if detail:
        msg += " -- " + detail
    raise cls(msg, ctx.mod_name if ctx else None, fn, line)
