"""What the benchmark writes: JSON rows (schema and checks), the markdown table, the PNG chart, the
RESULTS.md history entry and the progress line. Pure Python except the chart (matplotlib, optional)."""
from __future__ import annotations

import math
import sys
import time
from typing import Dict, Optional, Sequence

import bench_cases as bc

# The row, in order; every key is present in every row (None where not measured).
ROW_KEYS = ("impl", "case", "B", "H", "S", "D", "density", "fwd_ms", "fwd_tflops", "bwd_ms", "bwd_tflops",
            "compile_s")
# Also written: warm compile time, ‖out − ref‖/‖ref‖ against a float32 dense reference, and why a
# measurement failed. compile_s is the cold compile (empty caches), compile_warm_s a fresh process
# with the on-disk caches filled; both cover what the row measured (forward, plus backward).
# compile_fwd_s: the cold compile's block-mask and forward part alone (issue 5's "cold compile <= 2 s per
# variant" is the forward's; a training step compiles the backward beside it).
EXTRA_KEYS = ("compile_warm_s", "rel_err", "error")
# Written since session 11 (compile_fwd_s) and session 18 (bwd_det_ms: flexattn's backward in deterministic mode,
# bench/run.py --deterministic); results files from before lack them (--record still reads those).
LATER_KEYS = ("compile_fwd_s", "bwd_det_ms")
DECODE_ROW_KEYS = ("impl", "case", "B", "Hq", "Hkv", "S", "D", "page", "ms", "GBps")
REL_ERR_LIMIT = 3e-2  # bf16 outputs land between 1e-3 and 1e-2 (METHOD.md); above this a row is WRONG
_NUM = (int, float)


def make_row(impl: str, case: str, shape: bc.Shape, density: float, fwd_ms: Optional[float] = None,
             bwd_ms: Optional[float] = None, compile_s: Optional[float] = None,
             compile_warm_s: Optional[float] = None, rel_err: Optional[float] = None,
             error: Optional[str] = None, compile_fwd_s: Optional[float] = None,
             bwd_det_ms: Optional[float] = None) -> dict:
    entries = density * shape.S * shape.S
    row = {"impl": impl, "case": case, "B": shape.B, "H": shape.H, "S": shape.S, "D": shape.D,
           "density": density, "fwd_ms": fwd_ms, "fwd_tflops": bc.tflops(bc.fwd_flops(shape, entries), fwd_ms),
           "bwd_ms": bwd_ms, "bwd_tflops": bc.tflops(bc.bwd_flops(shape, entries), bwd_ms), "compile_s": compile_s,
           "compile_warm_s": compile_warm_s, "rel_err": rel_err, "error": error, "compile_fwd_s": compile_fwd_s,
           "bwd_det_ms": bwd_det_ms}
    validate_row(row)
    return row


def validate_row(row: dict) -> None:
    """Raises ValueError naming the first key that breaks the schema."""
    for k in ROW_KEYS + EXTRA_KEYS:
        if k not in row:
            raise ValueError(f"row: missing key '{k}'")
    unknown = sorted(set(row) - set(ROW_KEYS) - set(EXTRA_KEYS) - set(LATER_KEYS))
    if unknown:
        raise ValueError(f"row: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    if row["impl"] not in bc.IMPLS:
        raise ValueError(f"row: impl must be one of {', '.join(bc.IMPLS)}, got {row['impl']!r}")
    if row["case"] not in bc.ALL_CASES:
        raise ValueError(f"row: case must be one of {', '.join(bc.ALL_CASES)}, got {row['case']!r}")
    for k in ("B", "H", "S", "D"):
        if not isinstance(row[k], int) or isinstance(row[k], bool) or row[k] < 1:
            raise ValueError(f"row: {k} must be a positive int, got {row[k]!r}")
    if not isinstance(row["density"], _NUM) or not 0 < row["density"] <= 1:
        raise ValueError(f"row: density must be in (0, 1], got {row['density']!r}")
    for k in ("fwd_ms", "fwd_tflops", "bwd_ms", "bwd_tflops", "compile_s", "compile_warm_s", "rel_err",
              "compile_fwd_s", "bwd_det_ms"):
        v = row.get(k)
        if v is not None and (not isinstance(v, _NUM) or isinstance(v, bool) or not math.isfinite(v) or v < 0):
            raise ValueError(f"row: {k} must be a finite number >= 0 or null, got {v!r}")
    if row["error"] is not None and not isinstance(row["error"], str):
        raise ValueError(f"row: error must be a string or null, got {row['error']!r}")


def make_decode_row(impl: str, s: bc.DecodeShape, ms: Optional[float], error: Optional[str] = None) -> dict:
    return {"impl": impl, "case": "decode", "B": s.B, "Hq": s.Hq, "Hkv": s.Hkv, "S": s.S, "D": s.D,
            "page": s.page or 0, "ms": ms, "GBps": bc.gbps(bc.decode_bytes(s), ms), "window": s.window,
            "error": error}


# ---- markdown -----------------------------------------------------------------------------------------
def _f(v, fmt="{:.0f}"):
    return "—" if v is None else fmt.format(v)


def _cell(row: Optional[dict], key: str) -> str:
    if row is None:
        return ""
    if row["error"] is not None:
        return "err"
    text = _f(row[key])
    if row.get("rel_err") is not None and row["rel_err"] > REL_ERR_LIMIT:
        text += " WRONG"
    return text


def _cold(r: dict) -> str:
    """The cold compile; with a backward in it, its forward part too: "4.5 (fwd 1.3)"."""
    cold = _f(r["compile_s"], "{:.1f}")
    fwd = r.get("compile_fwd_s")
    if fwd is None or r["bwd_ms"] is None or r["compile_s"] is None:
        return cold
    return f"{cold} (fwd {fwd:.1f})"


def markdown_table(rows: Sequence[dict]) -> str:
    """One line per (shape, case): TFLOP/s of each impl (forward, then backward when any row has it),
    flexattn over the best peer, flexattn's deterministic backward cost over its default backward (when any row
    has it), and cold (its forward part) / warm compile seconds of the compiling impls."""
    impls = [i for i in bc.IMPLS if any(r["impl"] == i for r in rows)]
    bwd = any(r["bwd_ms"] is not None for r in rows)
    compiling = [i for i in bc.FLEX_IMPLS if any(r["impl"] == i and r["compile_s"] is not None for r in rows)]
    head = ["case", "B×H×S", "D", "density"] + [f"{i} fwd" for i in impls]
    if bwd:
        head += [f"{i} bwd" for i in impls]
    if "flexattn" in impls and len(impls) > 1:
        head += ["flexattn / best peer fwd"] + (["flexattn / best peer bwd"] if bwd else [])
    det = any(r.get("bwd_det_ms") is not None for r in rows)
    if det:
        head.append("flexattn deterministic bwd")
    head += [f"{i} compile s (cold / warm)" for i in compiling]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: Dict[tuple, Dict[str, dict]] = {}
    for r in rows:
        groups.setdefault((r["B"], r["H"], r["S"], r["D"], r["case"]), {})[r["impl"]] = r
    for (B, H, S, D, case), by in groups.items():
        any_row = next(iter(by.values()))
        cells = [case, f"{B}×{H}×{S}", str(D), f"{any_row['density']:.3f}"]
        cells += [_cell(by.get(i), "fwd_tflops") for i in impls]
        if bwd:
            cells += [_cell(by.get(i), "bwd_tflops") for i in impls]
        if "flexattn" in impls and len(impls) > 1:
            for key in ("fwd_tflops",) + (("bwd_tflops",) if bwd else ()):
                cells.append(_ratio(by, key))
        if det:
            cells.append(_det_cost(by.get("flexattn")))
        for i in compiling:
            r = by.get(i)
            cells.append("" if r is None else f"{_cold(r)} / {_f(r['compile_warm_s'], '{:.1f}')}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _det_cost(r: Optional[dict]) -> str:
    """flexattn's deterministic backward: "1.020 ms (+14.3 %)" against its default backward of the row."""
    if r is None or r["error"] or r.get("bwd_det_ms") is None or not r["bwd_ms"]:
        return "—"
    return f"{r['bwd_det_ms']:.3f} ms ({100 * (r['bwd_det_ms'] / r['bwd_ms'] - 1):+.1f} %)"


def _ratio(by: Dict[str, dict], key: str) -> str:
    ours = by.get("flexattn")
    if ours is None or ours["error"] or ours[key] is None:
        return "—"
    peers = [r[key] for i, r in by.items() if i != "flexattn" and not r["error"] and r[key] is not None]
    return "—" if not peers else f"{ours[key] / max(peers):.2f}×"


def decode_table(rows: Sequence[dict]) -> str:
    lines = ["| impl | B | Hq | Hkv | KV | D | page | window | ms | GB/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms = "err" if r["error"] else _f(r["ms"], "{:.3f}")
        lines.append(f"| {r['impl']} | {r['B']} | {r['Hq']} | {r['Hkv']} | {r['S']} | {r['D']} | "
                     f"{r['page'] or '—'} | {r.get('window') or '—'} | {ms} | {_f(r['GBps'])} |")
    return "\n".join(lines)


def table_caption(meta: dict) -> str:
    what = ("GB/s = bytes of K and V read once / time" if meta.get("suite") == "decode" else
            f"TFLOP/s over attended entries (forward 4·D flops per entry, backward {bc.BWD_FLOP_FACTOR}×)")
    return (f"{meta.get('device', '?')}, {meta.get('dtype', 'bf16')}; {what}; median of {meta.get('reps', '?')} "
            f"CUDA-event timings; torch {meta.get('torch', '?')}, triton {meta.get('triton', '?')}")


def results_entry(doc: dict) -> str:
    """The RESULTS.md section of one run (newest sections are appended at the end)."""
    m = doc["meta"]
    parts = [f"## {m.get('date', '?')} · {m.get('device', '?')} · suite {m.get('suite', '?')} · "
             f"commit {m.get('commit', 'unknown')}", "", table_caption(m) + ".", ""]
    if doc.get("rows"):
        parts += [markdown_table(doc["rows"]), ""]
    if doc.get("decode_rows"):
        parts += [decode_table(doc["decode_rows"]), ""]
    return "\n".join(parts) + "\n"


def device_slug(device: str) -> str:
    """'NVIDIA H200' -> 'h200' (the name of bench/results/<slug>-latest.json)."""
    words = [w for w in device.lower().replace("-", " ").split() if w not in ("nvidia", "geforce", "tesla")]
    slug = "-".join(words) or "unknown"
    return "".join(ch for ch in slug if ch.isalnum() or ch in "-.")


# ---- chart --------------------------------------------------------------------------------------------
def write_chart(rows: Sequence[dict], path: str) -> Optional[str]:
    """Grouped bars of TFLOP/s per case, one panel per shape and direction. Returns None, or why no
    chart was written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"no chart: matplotlib is not available ({e})"
    panels = []
    for key, label in (("fwd_tflops", "forward"), ("bwd_tflops", "backward")):
        for shape in dict.fromkeys((r["B"], r["H"], r["S"], r["D"]) for r in rows):
            sel = [r for r in rows if (r["B"], r["H"], r["S"], r["D"]) == shape and r[key] is not None]
            if sel:
                panels.append((f"{label} B={shape[0]} H={shape[1]} S={shape[2]} D={shape[3]}", key, sel))
    if not panels:
        return "no chart: no measured rows"
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels)), squeeze=False)
    impls = [i for i in bc.IMPLS if any(r["impl"] == i for r in rows)]
    width = 0.8 / max(len(impls), 1)
    for ax, (title, key, sel) in zip(axes[:, 0], panels):
        cases = [c for c in bc.ALL_CASES if any(r["case"] == c for r in sel)]
        for j, impl in enumerate(impls):
            vals = {r["case"]: r[key] for r in sel if r["impl"] == impl}
            xs = [i + j * width for i, c in enumerate(cases) if c in vals]
            ax.bar(xs, [vals[c] for c in cases if c in vals], width, label=impl)
        ax.set_xticks([i + width * (len(impls) - 1) / 2 for i in range(len(cases))])
        ax.set_xticklabels(cases, fontsize=8)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, ncol=len(impls))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


# ---- progress -----------------------------------------------------------------------------------------
class Progress:
    """One line that shows what is being compiled or measured. On a terminal it is rewritten in place;
    in a log (the device machine's captured output) each update is its own short line."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def line(self, what: str) -> str:
        return f"[{self.done}/{self.total} {time.time() - self.t0:6.1f}s] {what}"

    def update(self, what: str) -> None:
        text = self.line(what)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text[:160])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def step(self) -> None:
        self.done += 1

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
