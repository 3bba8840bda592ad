"""Carrying a mod across torch.compile's constant boundary.

Under torch.compile the plan (_torch_api._make_plan: the trace, its spec and the paths of its captured values) is
computed once per graph by a function Dynamo calls with real Python values (torch._dynamo.assume_constant_result).
Dynamo can hand such a function a global function, but not a function *made inside* the compiled code whose cells
hold values of the graph: a score_mod defined in a module's forward over `self` or over `bias * 2` failed with
"ClosureConversionError: failed to convert closure cell to Python constant" (on every compile once flexattn's
native module was loaded; the first only worked because that load broke the graph).

describe(mod, args) takes the mod apart with the accesses Dynamo traces (__code__, __closure__, __defaults__,
__func__ / __self__, items): functions, bound methods and containers become nested tuples of constants, and every other captured value
(a tensor, a module, a config object) becomes an index into `args`, which go to the constant function as separate
arguments, where Dynamo converts a tensor to its value and a traced object to itself. rebuild(description, args)
then makes a function of the same code, cells and defaults: the trace and the paths (_leaf_paths) of that function
are those of the mod, so the graph reads the captured values from the mod itself.
"""
from __future__ import annotations

import functools
import sys
import types

from ._arrays import torch_module

_MAX_DEPTH = 8


def supported() -> bool:
    """Whether this torch's assume_constant_result hands a traced object (a module, a config) to the function as
    itself (torch 2.15 does; 2.11 refuses with "UnspecializedNNModuleVariable is not a constant"). Without it the
    mods go to the plan whole, as Dynamo can convert a function defined outside the compiled code."""
    if _SUPPORTED[0] is None:
        try:
            from torch._dynamo.variables import functions

            convert = [c for c in functions.invoke_and_store_as_constant.__code__.co_consts
                       if isinstance(c, types.CodeType) and c.co_name == "convert"]
            _SUPPORTED[0] = bool(convert) and "UserDefinedObjectVariable" in convert[0].co_names
        except Exception:  # noqa: BLE001 - another torch: the whole-mod path
            _SUPPORTED[0] = False
    return _SUPPORTED[0]


_SUPPORTED = [None]


def plan_arguments(mods, numbers=False):
    """(descriptions, args) for _torch_api._make_plan: the mods taken apart where this torch allows it, else whole."""
    if not supported():
        return [("arg", 0), ("arg", 1)], list(mods)
    args = []
    return [describe(m, args, numbers=numbers) for m in mods], args


def describe(obj, args, depth=0, numbers=False):
    """numbers=False: a captured int or float is described by its kind only (a stand-in value in the plan). Dynamo
    makes a number that changed between calls symbolic, and a symbolic number is no constant: as one it broke the
    graph, or failed fullgraph. The graph reads the value through its path on every call; only a trace that branched
    on a value (its guards) needs the values themselves (numbers=True, which specialises the graph on them)."""
    if obj is None or type(obj) in (bool, str):
        return ("const", obj)
    if type(obj) in (int, float):
        if numbers:  # the value, as a 0-d tensor Dynamo evaluates for the plan (an int gets a guard on its value)
            args.append(torch_module().scalar_tensor(obj, dtype=torch_module().float64))
            return ("value", type(obj) is int, len(args) - 1)
        # (an int stands in as i32: a captured int beyond 32 bits is read as i32 under torch.compile; a comparison
        # of a symbolic int is no constant either)
        return ("number", type(obj) is int)
    if depth >= _MAX_DEPTH:
        args.append(obj)
        return ("arg", len(args) - 1)

    def part(x):
        return describe(x, args, depth + 1, numbers)

    def items(d):
        return tuple((k, part(v)) for k, v in d.items())

    if type(obj) is types.FunctionType:
        cells = tuple(part(c.cell_contents) for c in (obj.__closure__ or ()))
        return ("function", obj.__code__, tuple(part(d) for d in (obj.__defaults__ or ())),
                items(obj.__kwdefaults__ or {}), cells)
    if type(obj) is functools.partial:
        return ("partial", part(obj.func), tuple(part(a) for a in obj.args), items(obj.keywords))
    if type(obj) is types.MethodType:
        return ("method", part(obj.__func__), part(obj.__self__))
    if type(obj) in (tuple, list):
        return (type(obj).__name__, tuple(part(x) for x in obj))
    if type(obj) is dict:  # keys are constants to Dynamo
        return ("dict", items(obj))
    args.append(obj)
    return ("arg", len(args) - 1)


def _globals_of(code):
    """The globals of the module that defined `code`, found by its file (only the code object crosses into the plan:
    what Dynamo makes of a function's __module__ / __qualname__ differs between torch versions)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == code.co_filename:
            return module.__dict__
    main = sys.modules.get("__main__")
    return main.__dict__ if main is not None else {}


def _cell(value):
    return (lambda: value).__closure__[0]


def rebuild(desc, args):
    kind = desc[0]
    if kind == "const":
        return desc[1]
    if kind == "arg":
        return args[desc[1]]
    if kind == "number":  # a stand-in of the number's type
        return 1 if desc[1] else 1.0
    if kind == "value":
        value = args[desc[2]].item()
        return int(value) if desc[1] else float(value)
    if kind in ("tuple", "list"):
        return (tuple if kind == "tuple" else list)(rebuild(x, args) for x in desc[1])
    if kind == "dict":
        return {k: rebuild(v, args) for k, v in desc[1]}
    if kind == "partial":
        return functools.partial(rebuild(desc[1], args), *(rebuild(a, args) for a in desc[2]),
                                 **{k: rebuild(v, args) for k, v in desc[3]})
    if kind == "method":
        return types.MethodType(rebuild(desc[1], args), rebuild(desc[2], args))
    _, code, defaults, kwdefaults, cells = desc
    fn = types.FunctionType(code, _globals_of(code), code.co_name, tuple(rebuild(d, args) for d in defaults) or None,
                            tuple(_cell(rebuild(c, args)) for c in cells) or None)
    fn.__qualname__ = getattr(code, "co_qualname", code.co_name)
    if kwdefaults:
        fn.__kwdefaults__ = {k: rebuild(v, args) for k, v in kwdefaults}
    return fn
