#!/usr/bin/env python3
"""flexattn vs torch flex (torch.compile, Triton) vs SDPA (cuDNN, flash), side by side on the same inputs.

On the GPU machine:   python3 bench/run.py --suite quick --out $OUT          (scripts/bench_gpu.sh)
Here, afterwards:     python3 bench/run.py --record <folder with results.json> [more folders of the same session]
                      (bench/results/<device>-latest.json and a section of bench/RESULTS.md)

Writes results.json (meta + one row per impl × case × shape), table.md, chart.png and
RESULTS-entry.md under --out, and prints the markdown table last. See bench/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_cases as bc  # noqa: E402
import bench_report as br  # noqa: E402


# ---- arguments ----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=bc.SUITES, default="quick",
                   help="full: B=2 H=16 S=8192 and B=4 H=16 S=2048, D=64 and 128; long: B=2 H=16 S=8192, D=64 and 128 "
                        "(the issues' target shape); long128: the same at D=128 only (short A/B sweeps); quick: B=4 H=16 S=2048 D=128 "
                        "(under 3 minutes on an H200); hd256: B=2 H=16 S=8192 D=256; hd96: the same at D=96; "
                        "decode: one query token against a long KV "
                        "(default quick)")
    p.add_argument("--cases", help=f"comma-separated subset of {','.join(bc.ALL_CASES)} (default all of the suite: "
                   f"{','.join(bc.CASES)})")
    p.add_argument("--impls", help=f"comma-separated subset of {','.join(bc.IMPLS)} (default all)")
    p.add_argument("--backward", action="store_true", help="also time the backward (dq, dk, dv)")
    p.add_argument("--deterministic", action="store_true", help="with --backward: also time flexattn's backward in "
                   "deterministic mode (torch.use_deterministic_algorithms; row key bwd_det_ms; issue 6 wants it "
                   "at most 15 %% over bwd_ms)")
    p.add_argument("--out", default=os.environ.get("OUT") or "bench-out", help="output folder (default $OUT or "
                   "./bench-out)")
    p.add_argument("--reps", type=int, help=f"timed repetitions, median reported (>= {bc.MIN_REPS}; default "
                   + ", ".join(f"{k} {v}" for k, v in bc.DEFAULT_REPS.items()) + ")")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls before timing (default 5)")
    p.add_argument("--compile-jobs", type=int, default=2, help="threads compiling flexattn's kernels up front "
                   "(each variant's own compile is timed; 2: a variant's forward and backward side by side, as "
                   "in a training step's first call); 1: compile at the first call (default 2)")
    p.add_argument("--no-warm", action="store_true", help="skip the warm-compile measurement (a second process "
                   "that finds the on-disk caches filled)")
    p.add_argument("--cache-dir", help="folder for the flexattn, inductor and Triton caches (default: a new empty "
                   "folder, so compile_s is a cold compile)")
    p.add_argument("--record", metavar="DIR", nargs="+", help="no GPU: copy DIR/results.json of a device run to "
                   "bench/results/<device>-latest.json and append its table to bench/RESULTS.md; several DIRs "
                   "(runs of one session and commit, e.g. --suite long and --suite decode) are merged into one")
    p.add_argument("--probe-warm", metavar="FILE", help=argparse.SUPPRESS)  # the warm-compile child process
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """Parsed and checked arguments; cases / impls become tuples in table order and reps is filled in.
    Bad values exit with status 2 and a message naming the option."""
    p = build_parser()
    a = p.parse_args(argv)
    try:
        a.cases = bc.parse_list(a.cases, bc.ALL_CASES, "--cases", default=bc.CASES)
        a.impls = bc.parse_list(a.impls, bc.IMPLS, "--impls")
    except ValueError as e:
        p.error(str(e))
    if a.suite == "decode" and a.backward:
        p.error("--backward: the decode suite times the forward only")
    if a.deterministic and not a.backward:
        p.error("--deterministic: times the backward in deterministic mode, so it needs --backward")
    if a.reps is None:
        a.reps = bc.DEFAULT_REPS[a.suite]
    if a.reps < bc.MIN_REPS and not a.probe_warm:
        p.error(f"--reps: at least {bc.MIN_REPS} (the median of fewer is noise), got {a.reps}")
    if a.warmup < 0:
        p.error(f"--warmup: expected >= 0, got {a.warmup}")
    if a.compile_jobs < 1:
        p.error(f"--compile-jobs: expected >= 1, got {a.compile_jobs}")
    if a.suite != "decode" and not bc.jobs(a.suite, a.cases, a.impls):
        p.error(f"--impls {','.join(a.impls)} run none of --cases {','.join(a.cases)} (SDPA runs only "
                f"{', '.join(c for c in bc.CASES if bc.CASE_TABLE[c].sdpa_causal is not None)})")
    return a


def set_cache_env(cache_dir: str) -> None:
    """Points every compile cache at cache_dir (before torch / flexattn are imported)."""
    for var, sub in (("FLEXATTN_CACHE_DIR", "flexattn"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                     ("TRITON_CACHE_DIR", "triton")):
        os.environ[var] = os.path.join(cache_dir, sub)
        os.makedirs(os.environ[var], exist_ok=True)


def git_commit(repo: str = REPO) -> str:
    """HEAD, with "+dirty" when the tracked files differ from it. The device tool's copy of the tree carries
    a .git from the start of the session, so there the flag is what says the commit is only a base.
    FLEXATTN_COMMIT overrides (a script that knows the real commit can pass it)."""
    if os.environ.get("FLEXATTN_COMMIT"):
        return os.environ["FLEXATTN_COMMIT"]
    try:
        r = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            d = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
            return r.stdout.strip() + ("+dirty" if d.returncode == 0 and d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


# ---- --record (no GPU) ----------------------------------------------------------------------------------
RESULTS_HEADER = ("# Benchmark history\n\nOne section per recorded device run, newest last, appended by "
                  "`python3 bench/run.py --record DIR` (DIR: a run's --out folder). The latest run of each "
                  "device is also kept whole in `bench/results/<device>-latest.json`. Method: bench/README.md.\n")


def _load_run(src: str) -> dict:
    path = src if os.path.isfile(src) else os.path.join(src, "results.json")
    with open(path) as f:
        doc = json.load(f)
    if "meta" not in doc or not isinstance(doc.get("rows"), list):
        raise ValueError(f"--record: {path} is not a bench/run.py results file (needs 'meta' and 'rows')")
    for r in doc["rows"]:
        br.validate_row(r)
    return doc


def merge_runs(docs: list) -> dict:
    """One results document from runs of one device session (e.g. `--suite long` and `--suite decode`, which
    cannot share a call): rows and decode rows concatenated in order, the first run's meta with every run's
    suite, commit, start and notes kept. Runs of different devices or commits are refused: the latest file
    must describe one tree on one machine."""
    if len(docs) == 1:
        return docs[0]
    first = dict(docs[0]["meta"])
    for d in docs[1:]:
        m = d["meta"]
        for k in ("device", "commit"):
            if m.get(k) != first.get(k):
                raise ValueError(f"--record: the runs differ in {k} ({first.get(k)!r} vs {m.get(k)!r}); record them "
                                 "separately")
    first["suite"] = "+".join(d["meta"].get("suite", "?") for d in docs)
    first["runs"] = [{k: d["meta"].get(k) for k in ("suite", "started", "wall_s", "reps")} for d in docs]
    first["notes"] = [n for d in docs for n in d["meta"].get("notes", [])]
    return {"meta": first, "rows": [r for d in docs for r in d["rows"]],
            "decode_rows": [r for d in docs for r in d.get("decode_rows") or []]}


def carry_over(doc: dict, old: Optional[dict]) -> dict:
    """The latest file of a run without attention rows (a decode-only record) or without decode rows: the previous
    latest file's rows of that kind (same device) are kept, each kind's origin (suite, start, commit) in
    meta['carried'] and a note, so the file still has the device's newest numbers of every suite. The RESULTS.md
    section describes the new run alone."""
    if old is None or old.get("meta", {}).get("device") != doc["meta"].get("device"):
        return doc
    om = old["meta"]
    out = dict(doc, meta=dict(doc["meta"]))
    carried = []
    for kind in ("rows", "decode_rows"):
        if doc.get(kind) or not old.get(kind):
            continue
        out[kind] = old[kind]
        earlier = [c for c in om.get("carried", []) if c.get("kind") == kind]
        carried.append(earlier[0] if earlier else {"kind": kind, "suite": om.get("suite"), "started": om.get("started"),
                                                   "commit": om.get("commit")})
    if carried:
        out["meta"]["carried"] = carried
        out["meta"]["notes"] = list(doc["meta"].get("notes", [])) + [
            f"{c['kind']} carried from the run of {c['started']} (suite {c['suite']}, commit {c['commit']})"
            for c in carried]
    return out


def record(src, repo: str = REPO) -> int:
    doc = merge_runs([_load_run(x) for x in ([src] if isinstance(src, str) else src)])
    meta = doc["meta"]
    if meta.get("commit", "unknown") == "unknown":
        meta["commit"] = git_commit(repo) + " (at record time)"
    dest = os.path.join(repo, "bench", "results", f"{br.device_slug(meta.get('device', 'unknown'))}-latest.json")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    old = None
    if os.path.exists(dest):
        with open(dest) as f:
            old = json.load(f)
    with open(dest, "w") as f:
        json.dump(carry_over(doc, old), f, indent=1)
        f.write("\n")
    history = os.path.join(repo, "bench", "RESULTS.md")
    text = open(history).read() if os.path.exists(history) else RESULTS_HEADER
    marker = f"<!-- run {meta.get('started', '?')} {meta.get('device', '?')} -->"
    if marker in text:
        print(f"{history}: this run is already recorded; wrote {dest}")
        return 0
    with open(history, "w") as f:
        f.write(text.rstrip("\n") + "\n\n" + marker + "\n" + br.results_entry(doc))
    print(f"wrote {dest} and appended the run to {history}")
    return 0


# ---- the run (GPU) ------------------------------------------------------------------------------------
def flexattn_env(environ=None) -> dict:
    """The FLEXATTN_* switches a run was made with (not the paths and the build checks, which say nothing of the
    kernels): a record made with an opt-in set says so in its meta."""
    environ = os.environ if environ is None else environ
    skip = ("FLEXATTN_NATIVE_DIR", "FLEXATTN_CACHE_DIR", "FLEXATTN_REQUIRE_NATIVE")
    return {k: v for k, v in sorted(environ.items()) if k.startswith("FLEXATTN_") and k not in skip}


def collect_meta(args, notes):
    import torch
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    try:
        import flexattn
        flexattn_version = flexattn.__version__
    except ImportError:
        flexattn_version = None
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"date": now.strftime("%Y-%m-%d"), "started": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "device": torch.cuda.get_device_name(), "capability": ".".join(map(str, torch.cuda.get_device_capability())),
            "torch": torch.__version__, "triton": triton_version, "cuda": torch.version.cuda,
            "flexattn": flexattn_version, "commit": git_commit(), "suite": args.suite, "dtype": "bf16",
            "reps": args.reps, "warmup": args.warmup, "backward": args.backward, "compile_jobs": args.compile_jobs,
            "cases": list(args.cases), "impls": list(args.impls), "env": flexattn_env(), "notes": notes}


def run(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("bench/run.py: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    import bench_attention
    t0 = time.time()
    notes = []
    os.makedirs(args.out, exist_ok=True)
    rows, decode_rows = [], []
    if args.suite == "decode":
        decode_rows = bench_attention.run_decode(args, notes)
    else:
        rows = bench_attention.run_suite(args, notes)
        if not args.no_warm:
            bench_attention.add_warm_compile(args, rows, notes, os.path.abspath(__file__))
    meta = collect_meta(args, notes)
    meta["wall_s"] = round(time.time() - t0, 1)
    doc = {"meta": meta, "rows": rows, "decode_rows": decode_rows}
    return finish(doc, args.out)


def finish(doc, out) -> int:
    """Writes results.json, table.md, RESULTS-entry.md and chart.png; prints the table last."""
    meta, rows = doc["meta"], doc["rows"]
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    table = br.markdown_table(rows) if rows else br.decode_table(doc["decode_rows"])
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(br.table_caption(meta) + "\n\n" + table + "\n")
    with open(os.path.join(out, "RESULTS-entry.md"), "w") as f:
        f.write(br.results_entry(doc))
    why = br.write_chart(rows, os.path.join(out, "chart.png")) if rows else "no chart for the decode suite"
    failed = [r for r in rows + doc["decode_rows"] if r["error"]]
    wrong = [r for r in rows if r["rel_err"] is not None and r["rel_err"] > br.REL_ERR_LIMIT]
    for n in meta["notes"] + ([why] if why else []):
        print("note:", n)
    for r in failed:
        print(f"error: {r['impl']} {r['case']} S={r['S']} D={r['D']}: {r['error']}")
    for r in wrong:
        print(f"WRONG: {r['impl']} {r['case']} S={r['S']} D={r['D']}: rel err {r['rel_err']:.2e} > "
              f"{br.REL_ERR_LIMIT:.0e} against the float32 reference")
    print(f"wrote {out}/results.json, table.md, RESULTS-entry.md{'' if why else ', chart.png'} "
          f"({meta.get('wall_s', '?')} s)")
    print()
    print(br.table_caption(meta))
    print()
    print(table)
    return 1 if failed or wrong else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.record:
        return record(args.record)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="flexattn-bench-cache-")
    args.cache_dir = cache_dir
    set_cache_env(cache_dir)
    # The checkout's package when flexattn is not installed (its _C then comes from FLEXATTN_NATIVE_DIR).
    if importlib.util.find_spec("flexattn") is None and os.path.isdir(os.path.join(REPO, "python", "flexattn")):
        sys.path.insert(0, os.path.join(REPO, "python"))
    if args.probe_warm:
        import bench_attention
        return bench_attention.probe_warm(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
