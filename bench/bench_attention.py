"""The GPU side of the benchmark, part 3: the suite loop (progress, rows, failures kept as rows), the
warm-compile child process, and the decode suite. Called by run.py after the cache folders are set."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import torch

import bench_cases as bc
import bench_impls as bi
import bench_report as br
import bench_torch as bt


def _seed(shape_index, case):
    return 1000 * shape_index + bc.ALL_CASES.index(case)


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


def _impls(args, notes):
    """The requested implementations, without flexattn (and a note why) when its native module is unusable."""
    impls = list(args.impls)
    if "flexattn" in impls:
        why = bi.native_status()
        if why:
            notes.append(f"flexattn skipped: {why}")
            impls.remove("flexattn")
    return impls


def run_suite(args, notes):
    impls = _impls(args, notes)
    jobs = bc.jobs(args.suite, args.cases, impls)
    progress = br.Progress(len(jobs))
    _prime(impls, args.backward, progress, notes)
    prewarmed = {}
    if "flexattn" in impls and args.compile_jobs > 1:
        variants = {(c, s.D): (bt.make_score_mod(c, s.S, s.H), bt.make_mask_mod(c, s.S))
                    for s in bc.SUITE_SHAPES[args.suite] for c in args.cases}
        progress.update(f"compiling flexattn's {len(variants)} variants on {args.compile_jobs} threads")
        try:
            prewarmed, failures = bi.prewarm_flexattn(variants, args.compile_jobs, args.backward)
            notes += [f"flexattn compile failed: {_short(RuntimeError(f))}" for f in failures]
        except Exception as e:  # noqa: BLE001 - fall back to compiling at the first call
            notes.append(f"flexattn parallel compile failed, compiled at first call instead: {_short(e)}")
    rows = []
    for si, shape in enumerate(bc.SUITE_SHAPES[args.suite]):
        for case in args.cases:
            todo = [j.impl for j in jobs if j.shape == shape and j.case == case]
            if not todo:
                continue
            tag = f"{case} B={shape.B} H={shape.H} S={shape.S} D={shape.D}"
            progress.update(f"{tag}: inputs, exact density, float32 reference")
            try:
                ctx = bi.CaseContext(shape, case, _seed(si, case))
            except Exception as e:  # noqa: BLE001
                _sync()
                rows += [br.make_row(i, case, shape, bc.density(case, shape.S), error=f"setup: {_short(e)}")
                         for i in todo]
                progress.done += len(todo)
                continue
            if ctx.density_note:
                notes.append(f"{tag}: {ctx.density_note}")
            for impl in todo:
                def say(stage, impl=impl):
                    progress.update(f"{impl} {tag}: {stage}")
                say("compiling and measuring")
                # flexattn's kernels do not depend on S: a (case, D) compiles once, at its first shape.
                pre = prewarmed.pop((case, shape.D), None) if impl == "flexattn" else None
                rows.append(_one_row(impl, ctx, args, pre, say))
                progress.step()
            del ctx
            torch.cuda.empty_cache()
    progress.update("done")
    progress.close()
    return rows


def _prime(impls, backward, progress, notes):
    for impl in [i for i in impls if i in bc.FLEX_IMPLS]:
        progress.update(f"priming {impl} (imports, compiler start-up; not counted)")
        try:
            bi.prime(impl, backward)
        except Exception as e:  # noqa: BLE001 - its rows will say what fails
            notes.append(f"priming {impl} failed: {_short(e)}")
            _sync()


def _sync():
    """Waits for the device; a sticky CUDA error raises here, and then the rest of the run fails too."""
    try:
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        pass


def _plus(a, b):
    return a if a is None or b is None else a + b


def _one_row(impl, ctx, args, prewarm, say):
    """One row; prewarm: flexattn's (seconds, forward seconds) from prewarm_flexattn, added to its compile times."""
    shape, case = ctx.shape, ctx.case
    try:
        m = bi.measure(impl, ctx, args.reps, args.warmup, args.backward, say,
                       deterministic=args.deterministic)
    except Exception as e:  # noqa: BLE001 - one failing impl must not lose the others' numbers
        _sync()
        return br.make_row(impl, case, shape, ctx.density, error=_short(e))
    err = m["rel_err"]
    error = None
    if err is not None and not math.isfinite(err):
        error, err = "the output has NaN or inf", None
    pre_s, pre_fwd_s = prewarm or (None, None)
    compile_s, compile_fwd_s = _plus(m["compile_s"], pre_s), _plus(m["compile_fwd_s"], pre_fwd_s)
    return br.make_row(impl, case, shape, ctx.density, m["fwd_ms"], m["bwd_ms"], compile_s, rel_err=err,
                       error=error, compile_fwd_s=compile_fwd_s, bwd_det_ms=m.get("bwd_det_ms"))


# ---- warm compile: a second process with the caches the first one filled -------------------------------
def add_warm_compile(args, rows, notes, run_py):
    impls = sorted({r["impl"] for r in rows if r["impl"] in bc.FLEX_IMPLS and not r["error"]})
    if not impls:
        return
    path = os.path.join(args.out, "warm-compile.json")
    cmd = [sys.executable, run_py, "--probe-warm", path, "--suite", args.suite, "--cases", ",".join(args.cases),
           "--impls", ",".join(impls), "--cache-dir", args.cache_dir, "--out", args.out]
    if args.backward:
        cmd.append("--backward")
    print(f"[warm compile] a fresh process, caches in {args.cache_dir}", file=sys.stderr, flush=True)
    try:
        # A hung child must not cost the whole device call (10 minutes at most) and the table with it.
        r = subprocess.run(cmd, timeout=240 if args.suite == "quick" else 540)
        with open(path) as f:
            warm = {(w["impl"], w["case"], w["S"], w["D"]): w["compile_warm_s"] for w in json.load(f)}
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        notes.append(f"warm compile not measured: {_short(e)}")
        return
    if r.returncode != 0:
        notes.append(f"warm-compile process exited with {r.returncode}; its rows may be missing")
    for row in rows:
        row["compile_warm_s"] = warm.get((row["impl"], row["case"], row["S"], row["D"]), row["compile_warm_s"])


def probe_warm(args):
    """The child: every flex variant once more, in a fresh process, against the filled caches; writes
    [{impl, case, S, D, compile_warm_s}] to args.probe_warm."""
    impls = [i for i in args.impls if i in bc.FLEX_IMPLS]
    jobs = bc.jobs(args.suite, args.cases, impls)
    progress = br.Progress(len(jobs))
    _prime(impls, args.backward, progress, [])
    out = []
    for si, shape in enumerate(bc.SUITE_SHAPES[args.suite]):
        for case in args.cases:
            todo = [j.impl for j in jobs if j.shape == shape and j.case == case]
            if not todo:
                continue
            ctx = bi.CaseContext(shape, case, _seed(si, case), with_reference=False)
            for impl in todo:
                progress.update(f"warm compile: {impl} {case} S={shape.S} D={shape.D}")
                try:
                    m = bi.measure(impl, ctx, reps=5, warmup=1, backward=args.backward)
                    out.append({"impl": impl, "case": case, "S": shape.S, "D": shape.D,
                                "compile_warm_s": m["compile_s"]})
                except Exception as e:  # noqa: BLE001
                    print(f"warm compile: {impl} {case}: {_short(e)}", file=sys.stderr)
                progress.step()
            del ctx
    progress.close()
    with open(args.probe_warm, "w") as f:
        json.dump(out, f)
    return 0


# ---- decode ----------------------------------------------------------------------------------------
def run_decode(args, notes):
    impls = _impls(args, notes)
    notes.append("decode: flexattn runs flexattn.paged_attention (the decode kernels); torch-flex and SDPA "
                 "have no paged rows (no paged KV cache here); SDPA's window row reads only the window")
    jobs = [(s, impl) for s in bc.DECODE_SHAPES for impl in impls if s.page is None or impl == "flexattn"]
    progress = br.Progress(len(jobs))
    rows = []
    for s, impl in jobs:
        progress.update(f"decode {impl} B={s.B} KV={s.S} page={s.page} window={s.window}")
        try:
            ms = bi.measure_decode(impl, s, args.reps, args.warmup)
            rows.append(br.make_decode_row(impl, s, ms))
        except Exception as e:  # noqa: BLE001
            rows.append(br.make_decode_row(impl, s, None, _short(e)))
        progress.step()
    progress.close()
    return rows
