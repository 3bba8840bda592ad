"""The benchmark's cases, suites and arithmetic: pure Python (no torch), so CI tests it without a GPU.

Counting convention (anchors-h200.md): TFLOP/s count only attended score entries; the forward does
4·D flops per entry (QKᵀ and PV), the backward 2.5× the forward's flops. Densities are exact counts of
the attended entries over S·S, from closed forms per query row (the driver checks them on the GPU
against the mask_mod itself).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

IMPLS = ("flexattn", "torch-flex", "sdpa-cudnn", "sdpa-flash")
FLEX_IMPLS = ("flexattn", "torch-flex")  # the two that compile per variant
SDPA_IMPLS = ("sdpa-cudnn", "sdpa-flash")
CASES = ("full", "causal", "sliding1024", "document", "prefixlm", "alibi_causal", "softcap_causal", "relbias_full")
# Outside the suite (the issues' table), run only when --cases names them: softcap through the GPU's approximate
# tanh in both flexattn (tanh_approx) and torch flex (attention-gym's approx::tanh custom op, tanh.approx.f32); T5's
# bucketed relative bias (attention-gym's form: a log per entry for torch flex, flexattn's distance tables,
# FLEXATTN_SM90_REL_DIAG's default since session 29); the relative-position bias as a learnable parameter (issue 6:
# its backward within 25 % of relbias_full's; with --deterministic the exact buffer-gradient sums, session 32).
EXTRA_CASES = ("softcap_approx_causal", "t5_full", "relbias_learnable_full")
ALL_CASES = CASES + EXTRA_CASES
SUITES = ("full", "long", "long128", "quick", "hd256", "hd96", "decode")

WINDOW = 1024          # sliding1024: q - kv < WINDOW and causal, each query sees WINDOW keys
N_DOCS = 8             # document: 8 packed documents, causal within each
DOC_SEED = 0           # their lengths are a seeded random split (equal lengths would be an easy case)
PREFIX_DIVISOR = 4     # prefixlm: the first S/4 keys are visible to every query, causal elsewhere
SOFTCAP = 30.0
T5_BUCKETS, T5_MAX_DISTANCE = 32, 128  # t5_full: bidirectional, as T5's encoder
BWD_FLOP_FACTOR = 2.5


@dataclass(frozen=True)
class Case:
    name: str
    mask: str             # "none", "causal", "sliding", "document", "prefixlm"
    score: str            # "none", "alibi", "softcap", "softcap_approx", "relbias", "relbias_learnable", "t5"
    sdpa_causal: Optional[bool]  # None: SDPA has no backend for it; else its is_causal flag
    title: str


CASE_TABLE: Dict[str, Case] = {c.name: c for c in (
    Case("full", "none", "none", False, "full"),
    Case("causal", "causal", "none", True, "causal"),
    Case("sliding1024", "sliding", "none", None, "sliding window 1024 (causal)"),
    Case("document", "document", "none", None, "document mask (8 docs, causal)"),
    Case("prefixlm", "prefixlm", "none", None, "prefix-LM (prefix S/4)"),
    Case("alibi_causal", "causal", "alibi", None, "ALiBi + causal"),
    Case("softcap_causal", "causal", "softcap", None, "softcap 30 + causal"),
    Case("relbias_full", "none", "relbias", None, "relative-position bias gather, full"),
    Case("softcap_approx_causal", "causal", "softcap_approx", None, "softcap 30 with tanh.approx + causal"),
    Case("t5_full", "none", "t5", None, "T5 bucketed relative bias (32 buckets, max distance 128), full"),
    Case("relbias_learnable_full", "none", "relbias_learnable", None,
         "relative-position bias, learnable (its gradient in the backward), full"),
)}


@dataclass(frozen=True)
class Shape:
    B: int
    H: int
    S: int
    D: int


SUITE_SHAPES: Dict[str, Tuple[Shape, ...]] = {
    # The anchors' long and short shapes, both head dims.
    "full": (Shape(2, 16, 8192, 128), Shape(2, 16, 8192, 64), Shape(4, 16, 2048, 128), Shape(4, 16, 2048, 64)),
    # The issues' targets are stated at the long shape: both head dims, about half of "full"'s device time
    # (so it fits one 10-minute device call next to nothing else).
    "long": (Shape(2, 16, 8192, 128), Shape(2, 16, 8192, 64)),
    # The long shape at D=128 alone: A/B sweeps that must fit a short device call.
    "long128": (Shape(2, 16, 8192, 128),),
    # Under 3 minutes on an H200: the short shape at D=128 only (the anchors' short suite).
    "quick": (Shape(4, 16, 2048, 128),),
    # Head dim 256 at the long shape (the backward's wide kernel; outside the issues' target table).
    "hd256": (Shape(2, 16, 8192, 256),),
    # Head dim 96 at the long shape (issue 5's "96 if cheap": the sm90 forward runs it on the D=128 kernel, zero-padded;
    # the backward on the sm80 family).
    "hd96": (Shape(2, 16, 8192, 96),),
}
DEFAULT_REPS = {"full": 50, "long": 30, "long128": 30, "quick": 20, "hd256": 20, "hd96": 20, "decode": 50}
MIN_REPS = 20


@dataclass(frozen=True)
class Job:
    impl: str
    case: str
    shape: Shape


def applies(impl: str, case: str) -> bool:
    """Does `impl` run `case`? SDPA only where a backend computes it without a dense mask."""
    return impl in FLEX_IMPLS or CASE_TABLE[case].sdpa_causal is not None


def parse_list(text: Optional[str], allowed: Sequence[str], arg: str,
               default: Optional[Sequence[str]] = None) -> Tuple[str, ...]:
    """'a,b' -> ('a', 'b') in `allowed` order; None or 'all' -> `default` (all of `allowed` when None). Raises
    ValueError naming `arg`."""
    if text is None or text.strip() == "all":
        return tuple(allowed if default is None else default)
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(f"{arg}: expected a comma-separated list of {', '.join(allowed)}, got {text!r}")
    bad = [n for n in names if n not in allowed]
    if bad:
        raise ValueError(f"{arg}: unknown name{'s' if len(bad) > 1 else ''} {', '.join(bad)}; "
                         f"expected some of {', '.join(allowed)}")
    return tuple(a for a in allowed if a in names)


def jobs(suite: str, cases: Sequence[str], impls: Sequence[str]) -> List[Job]:
    """The measurements of a suite, grouped by shape, then case, then impl (so the inputs of one
    (shape, case) are made once and shared by every impl)."""
    if suite not in SUITE_SHAPES:
        raise ValueError(f"--suite: {suite!r} has no attention jobs; expected one of {', '.join(SUITE_SHAPES)}")
    return [Job(i, c, s) for s in SUITE_SHAPES[suite] for c in cases for i in impls if applies(i, c)]


# ---- exact densities ----------------------------------------------------------------------------------
def doc_lengths(S: int, n_docs: int = N_DOCS, seed: int = DOC_SEED) -> List[int]:
    """n_docs positive lengths summing to S: a seeded random split (the same on every machine)."""
    if not 1 <= n_docs <= S:
        raise ValueError(f"doc_lengths: need 1 <= n_docs <= S, got n_docs={n_docs}, S={S}")
    cuts = sorted(random.Random(seed).sample(range(1, S), n_docs - 1))
    bounds = [0] + cuts + [S]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def doc_ids(S: int, n_docs: int = N_DOCS, seed: int = DOC_SEED) -> List[int]:
    return [i for i, n in enumerate(doc_lengths(S, n_docs, seed)) for _ in range(n)]


def attended_per_row(case: str, S: int) -> List[int]:
    """Number of keys query row q attends, for every q (the mask does not depend on b or h)."""
    mask = CASE_TABLE[case].mask
    if mask == "none":
        return [S] * S
    if mask == "causal":
        return [q + 1 for q in range(S)]
    if mask == "sliding":
        return [min(q + 1, WINDOW) for q in range(S)]
    if mask == "prefixlm":
        prefix = S // PREFIX_DIVISOR
        return [max(q + 1, prefix) for q in range(S)]
    if mask == "document":
        rows = []
        for n in doc_lengths(S):
            rows += [i + 1 for i in range(n)]
        return rows
    raise AssertionError(f"unhandled mask kind {mask}")


def attended_entries(case: str, S: int) -> int:
    """Attended (q, kv) entries of one (batch, head)."""
    return sum(attended_per_row(case, S))


def density(case: str, S: int) -> float:
    return attended_entries(case, S) / (S * S)


# ---- flops ------------------------------------------------------------------------------------------
def fwd_flops(shape: Shape, entries_per_head: int) -> float:
    return 4.0 * shape.D * shape.B * shape.H * entries_per_head


def bwd_flops(shape: Shape, entries_per_head: int) -> float:
    return BWD_FLOP_FACTOR * fwd_flops(shape, entries_per_head)


def tflops(flops: float, ms: Optional[float]) -> Optional[float]:
    if ms is None or ms <= 0:
        return None
    return flops / (ms * 1e-3) / 1e12


# ---- decode (hook: rows impl, case "decode", B, Hq, Hkv, S, D, page, ms, GBps) ------------------------
@dataclass(frozen=True)
class DecodeShape:
    B: int
    Hq: int
    Hkv: int
    S: int            # KV length (every sequence full: one query row at position S - 1)
    D: int
    page: Optional[int] = None  # paged KV page size; None = contiguous KV
    window: int = 0             # sliding window (kv positions q - window .. q); 0 = the whole cache


# Issue 7's shapes (Hq=32, Hkv=8, D=128), contiguous and paged (pages of 16 and 128), and a 4096 window on
# the longest cache (its time should scale with the window, not the cache).
DECODE_SHAPES = tuple(DecodeShape(B, 32, 8, S, 128, page) for B, S in ((8, 8192), (1, 131072), (64, 4096))
                      for page in (None, 16, 128)) + (DecodeShape(1, 32, 8, 131072, 128, None, 4096),)


def decode_bytes(s: DecodeShape, elem_bytes: int = 2) -> int:
    """Bytes of K and V a step must read once (the anchors' GB/s numerator): the cache, or the window."""
    rows = min(s.S, s.window + 1) if s.window else s.S
    return 2 * s.B * s.Hkv * rows * s.D * elem_bytes


def gbps(nbytes: float, ms: Optional[float]) -> Optional[float]:
    if ms is None or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9
