"""bench/run.py's pure parts (no torch, no GPU): the case table and suites, exact densities against a
brute-force mask, FLOP / GB/s counting, the JSON row schema, the markdown table, argument checking,
the output files and the --record step."""
import importlib.util
import io
import json
import math
import os
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)

import bench_cases as bc  # noqa: E402
import bench_report as br  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_run", os.path.join(BENCH, "run.py"))
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

SHORT = bc.Shape(4, 16, 2048, 128)


# ---- cases and suites ---------------------------------------------------------------------------------
def test_importing_the_driver_pulls_in_no_gpu_module():
    assert "bench_torch" not in sys.modules and "bench_impls" not in sys.modules


def test_case_and_impl_names_are_the_issues():
    assert bc.CASES == ("full", "causal", "sliding1024", "document", "prefixlm", "alibi_causal", "softcap_causal",
                        "relbias_full")
    assert bc.IMPLS == ("flexattn", "torch-flex", "sdpa-cudnn", "sdpa-flash")
    assert bc.EXTRA_CASES == ("softcap_approx_causal", "t5_full", "relbias_learnable_full")
    assert bc.ALL_CASES == bc.CASES + bc.EXTRA_CASES
    assert set(bc.CASE_TABLE) == set(bc.ALL_CASES)


def test_extra_cases_run_only_when_named():
    from run import parse_args

    assert parse_args([]).cases == bc.CASES
    assert parse_args(["--cases", "all"]).cases == bc.CASES
    assert parse_args(["--cases", "softcap_approx_causal,causal"]).cases == ("causal", "softcap_approx_causal")
    assert bc.CASE_TABLE["softcap_approx_causal"].mask == "causal"
    assert bc.density("softcap_approx_causal", 2048) == bc.density("softcap_causal", 2048)


def test_sdpa_runs_only_full_and_causal():
    assert [c for c in bc.CASES if bc.applies("sdpa-cudnn", c)] == ["full", "causal"]
    assert all(bc.applies("flexattn", c) and bc.applies("torch-flex", c) for c in bc.CASES)
    assert bc.CASE_TABLE["causal"].sdpa_causal is True and bc.CASE_TABLE["full"].sdpa_causal is False


def test_quick_suite_is_the_short_shape_with_every_case_and_impl():
    jobs = bc.jobs("quick", bc.CASES, bc.IMPLS)
    assert {j.shape for j in jobs} == {SHORT}
    assert len(jobs) == 8 * 2 + 2 * 2
    # grouped by case, so the inputs of a case are made once for every impl
    order = [j.case for j in jobs]
    assert order == sorted(order, key=bc.CASES.index)


def test_full_suite_has_both_shapes_and_head_dims():
    shapes = {(s.B, s.H, s.S, s.D) for s in bc.SUITE_SHAPES["full"]}
    assert shapes == {(2, 16, 8192, 64), (2, 16, 8192, 128), (4, 16, 2048, 64), (4, 16, 2048, 128)}
    assert len(bc.jobs("full", bc.CASES, bc.IMPLS)) == 4 * 20


def test_long_suite_is_the_long_shape_at_both_head_dims():
    shapes = {(s.B, s.H, s.S, s.D) for s in bc.SUITE_SHAPES["long"]}
    assert shapes == {(2, 16, 8192, 64), (2, 16, 8192, 128)}
    assert len(bc.jobs("long", bc.CASES, bc.IMPLS)) == 2 * 20
    assert bc.DEFAULT_REPS["long"] >= bc.MIN_REPS


def test_hd256_suite_is_the_long_shape_at_head_dim_256():
    assert [(s.B, s.H, s.S, s.D) for s in bc.SUITE_SHAPES["hd256"]] == [(2, 16, 8192, 256)]
    assert len(bc.jobs("hd256", bc.CASES, bc.IMPLS)) == 20
    assert bc.DEFAULT_REPS["hd256"] >= bc.MIN_REPS


def test_hd96_suite_is_the_long_shape_at_head_dim_96():
    assert [(s.B, s.H, s.S, s.D) for s in bc.SUITE_SHAPES["hd96"]] == [(2, 16, 8192, 96)]
    assert len(bc.jobs("hd96", ["full", "causal"], bc.IMPLS)) == 8
    assert bc.DEFAULT_REPS["hd96"] >= bc.MIN_REPS
    assert [(s.B, s.H, s.S, s.D) for s in bc.SUITE_SHAPES["long128"]] == [(2, 16, 8192, 128)]
    assert bc.DEFAULT_REPS["long128"] >= bc.MIN_REPS


def test_decode_suite_has_no_attention_jobs():
    with pytest.raises(ValueError, match="--suite"):
        bc.jobs("decode", bc.CASES, bc.IMPLS)


def test_parse_list_keeps_table_order_and_names_the_option():
    assert bc.parse_list("causal,full", bc.CASES, "--cases") == ("full", "causal")
    assert bc.parse_list(None, bc.CASES, "--cases") == bc.CASES
    assert bc.parse_list("all", bc.IMPLS, "--impls") == bc.IMPLS
    with pytest.raises(ValueError, match=r"--cases: unknown name nope; expected some of full, causal"):
        bc.parse_list("full,nope", bc.CASES, "--cases")
    with pytest.raises(ValueError, match="--impls: expected a comma-separated list"):
        bc.parse_list(",", bc.IMPLS, "--impls")


# ---- densities ----------------------------------------------------------------------------------------
def brute_force_mask(case, S):
    """The cases' masks written independently, evaluated on the dense grid."""
    q, kv = np.arange(S)[:, None], np.arange(S)[None, :]
    kind = bc.CASE_TABLE[case].mask
    if kind == "none":
        return np.ones((S, S), bool)
    if kind == "causal":
        return q >= kv
    if kind == "sliding":
        return (q >= kv) & (q - kv < 1024)
    if kind == "prefixlm":
        return (kv < S // 4) | (q >= kv)
    docs = np.repeat(np.arange(8), bc.doc_lengths(S))
    return (docs[q] == docs[kv]) & (q >= kv)


@pytest.mark.parametrize("case", bc.ALL_CASES)
def test_attended_entries_match_the_dense_mask(case):
    S = 2048
    assert bc.attended_entries(case, S) == int(brute_force_mask(case, S).sum())


def test_densities_match_the_anchors():
    S = 8192
    assert bc.density("full", S) == 1.0
    assert bc.density("causal", S) == pytest.approx((S + 1) / (2 * S))
    assert bc.density("sliding1024", S) == pytest.approx(0.117, abs=5e-4)
    assert bc.density("prefixlm", S) == pytest.approx(0.531, abs=5e-4)
    assert bc.density("alibi_causal", S) == bc.density("causal", S) == bc.density("softcap_causal", S)
    assert bc.density("relbias_full", S) == 1.0 == bc.density("t5_full", S) == bc.density("relbias_learnable_full", S)
    assert 1 / 16 < bc.density("document", S) < 0.5  # random lengths: above 8 equal documents' 1/16


def test_document_lengths_are_a_seeded_split_of_S():
    lengths = bc.doc_lengths(8192)
    assert len(lengths) == 8 and sum(lengths) == 8192 and min(lengths) >= 1
    assert lengths == bc.doc_lengths(8192)  # the same on every call and machine
    assert lengths != bc.doc_lengths(8192, seed=1)
    assert bc.doc_ids(10, 2, 0)[0] == 0 and bc.doc_ids(10, 2, 0)[-1] == 1
    with pytest.raises(ValueError, match="n_docs"):
        bc.doc_lengths(4, 5)


# ---- counting -----------------------------------------------------------------------------------------
def test_forward_flops_are_four_d_per_attended_entry_and_backward_two_and_a_half_times():
    shape = bc.Shape(2, 16, 8192, 128)
    entries = 8192 * 8192
    assert bc.fwd_flops(shape, entries) == 4 * 128 * 2 * 16 * entries
    assert bc.bwd_flops(shape, entries) == 2.5 * bc.fwd_flops(shape, entries)
    # the anchors' flex-Triton full D=128 forward: 476 TFLOP/s <=> 2.310 ms
    ms = bc.fwd_flops(shape, entries) / 476e12 * 1e3
    assert bc.tflops(bc.fwd_flops(shape, entries), ms) == pytest.approx(476)
    assert bc.tflops(1e12, None) is None and bc.tflops(1e12, 0) is None


def test_decode_bytes_count_k_and_v_once():
    s = bc.DecodeShape(8, 32, 8, 8192, 128)
    assert bc.decode_bytes(s) == 2 * 8 * 8 * 8192 * 128 * 2
    assert bc.gbps(bc.decode_bytes(s), 1.0) == pytest.approx(bc.decode_bytes(s) / 1e6)
    assert bc.gbps(1, None) is None


# ---- rows ---------------------------------------------------------------------------------------------
def row(impl="flexattn", case="causal", fwd=1.0, bwd=None, shape=SHORT, **kw):
    return br.make_row(impl, case, shape, bc.density(case, shape.S), fwd, bwd, **kw)


def test_row_has_the_issues_keys_in_order_and_computes_tflops():
    r = row(fwd=2.0, bwd=5.0, compile_s=3.0, compile_warm_s=0.5, rel_err=4e-3)
    assert tuple(r)[:len(br.ROW_KEYS)] == br.ROW_KEYS
    entries = r["density"] * SHORT.S ** 2
    assert r["fwd_tflops"] == pytest.approx(4 * 128 * 4 * 16 * entries / 2e-3 / 1e12)
    assert r["bwd_tflops"] == pytest.approx(2.5 * 4 * 128 * 4 * 16 * entries / 5e-3 / 1e12)
    assert json.loads(json.dumps(r)) == r


def test_an_unmeasured_row_keeps_every_key_as_null():
    r = br.make_row("sdpa-flash", "full", SHORT, 1.0, error="RuntimeError: no kernel")
    assert r["fwd_ms"] is None and r["fwd_tflops"] is None and r["compile_s"] is None
    assert r["error"] == "RuntimeError: no kernel"


@pytest.mark.parametrize("change, message", [
    ({"impl": "triton"}, "impl must be one of flexattn"),
    ({"case": "dilated"}, "case must be one of full"),
    ({"S": 0}, "S must be a positive int"),
    ({"D": 64.0}, "D must be a positive int"),
    ({"density": 1.5}, r"density must be in \(0, 1\]"),
    ({"fwd_ms": -1.0}, "fwd_ms must be a finite number"),
    ({"bwd_tflops": math.nan}, "bwd_tflops must be a finite number"),
    ({"compile_s": "3"}, "compile_s must be a finite number"),
    ({"error": 3}, "error must be a string"),
    ({"extra": 1}, "unknown key extra"),
])
def test_validate_row_names_the_bad_key(change, message):
    r = row()
    r.update(change)
    with pytest.raises(ValueError, match="row: " + message):
        br.validate_row(r)


def test_validate_row_names_a_missing_key():
    r = row()
    del r["fwd_tflops"]
    with pytest.raises(ValueError, match="row: missing key 'fwd_tflops'"):
        br.validate_row(r)


def test_decode_row_schema():
    r = br.make_decode_row("sdpa-flash", bc.DECODE_SHAPES[0], 0.08)
    assert tuple(r)[:len(br.DECODE_ROW_KEYS)] == br.DECODE_ROW_KEYS
    assert r["case"] == "decode" and r["page"] == 0 and r["window"] == 0  # 0 = contiguous, no window
    assert r["GBps"] == pytest.approx(bc.decode_bytes(bc.DECODE_SHAPES[0]) / 0.08e-3 / 1e9)
    assert "| sdpa-flash | 8 | 32 | 8 | 8192 | 128 | — | — | 0.080 |" in br.decode_table([r])
    paged = br.make_decode_row("flexattn", bc.DecodeShape(8, 32, 8, 8192, 128, 16), 0.08)
    assert paged["page"] == 16 and "| flexattn | 8 | 32 | 8 | 8192 | 128 | 16 | — | 0.080 |" in br.decode_table([paged])


def test_decode_suite_covers_issue_shapes_paged_and_window():
    got = {(s.B, s.S, s.page, s.window) for s in bc.DECODE_SHAPES}
    for B, S in ((8, 8192), (1, 131072), (64, 4096)):
        assert {(B, S, None, 0), (B, S, 16, 0), (B, S, 128, 0)} <= got
    assert (1, 131072, None, 4096) in got


def test_decode_bytes_of_a_window_count_only_the_window():
    s = bc.DecodeShape(1, 32, 8, 131072, 128, None, 4096)
    assert bc.decode_bytes(s) == 2 * 1 * 8 * 4097 * 128 * 2


# ---- markdown -----------------------------------------------------------------------------------------
def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_markdown_table_one_line_per_case_with_ratio_and_compile_times():
    rows = [row("flexattn", "causal", 1.0, compile_s=3.14, compile_warm_s=0.42, rel_err=3e-3),
            row("torch-flex", "causal", 2.0, compile_s=5.0, compile_warm_s=1.0),
            row("sdpa-cudnn", "causal", 0.5),
            row("flexattn", "document", 1.0, compile_s=2.0),
            row("torch-flex", "document", None, error="boom")]
    lines = br.markdown_table(rows).splitlines()
    head = cells(lines[0])
    assert head[:4] == ["case", "B×H×S", "D", "density"]
    assert "flexattn fwd" in head and "sdpa-cudnn fwd" in head and "sdpa-flash fwd" not in head
    assert not any("bwd" in h for h in head)  # no backward measured: no backward columns
    assert head[-2:] == ["flexattn compile s (cold / warm)", "torch-flex compile s (cold / warm)"]
    assert len(lines) == 2 + 2
    causal = dict(zip(head, cells(lines[2])))
    assert causal["case"] == "causal" and causal["B×H×S"] == "4×16×2048" and causal["density"] == "0.500"
    assert float(causal["flexattn fwd"]) == pytest.approx(rows[0]["fwd_tflops"], abs=0.5)
    assert causal["flexattn / best peer fwd"] == f"{rows[0]['fwd_tflops'] / rows[2]['fwd_tflops']:.2f}×"
    assert causal["flexattn compile s (cold / warm)"] == "3.1 / 0.4"
    document = dict(zip(head, cells(lines[3])))
    assert document["torch-flex fwd"] == "err" and document["sdpa-cudnn fwd"] == ""
    assert document["flexattn / best peer fwd"] == "—"  # the only peer failed
    assert document["flexattn compile s (cold / warm)"] == "2.0 / —"


def test_extra_case_rows_validate_and_tabulate():
    rows = [row("flexattn", "softcap_approx_causal", 0.8), row("torch-flex", "softcap_approx_causal", 1.6),
            row("flexattn", "softcap_causal", 1.0)]
    for r in rows:
        br.validate_row(r)
    lines = br.markdown_table(rows).splitlines()
    head = cells(lines[0])
    approx = dict(zip(head, cells(lines[2])))  # rows keep their order (a merged record: the suites first)
    assert approx["case"] == "softcap_approx_causal" and approx["flexattn / best peer fwd"] == "2.00×"
    bad = row("flexattn", "causal", 1.0)
    bad["case"] = "softcap_approx"
    with pytest.raises(ValueError, match="case must be one of"):
        br.validate_row(bad)


def test_cold_compile_shows_its_forward_part_when_the_row_has_a_backward():
    rows = [row("flexattn", "causal", 1.0, 3.0, compile_s=4.46, compile_fwd_s=1.26),
            row("flexattn", "full", 1.0, compile_s=1.3, compile_fwd_s=1.3),
            row("torch-flex", "causal", 1.0, 3.0, compile_s=6.0)]
    lines = br.markdown_table(rows).splitlines()
    head = cells(lines[0])
    by_case = {cells(line)[0]: dict(zip(head, cells(line))) for line in lines[2:]}
    assert by_case["causal"]["flexattn compile s (cold / warm)"] == "4.5 (fwd 1.3) / —"
    assert by_case["causal"]["torch-flex compile s (cold / warm)"] == "6.0 / —"  # no forward part measured
    assert by_case["full"]["flexattn compile s (cold / warm)"] == "1.3 / —"  # forward only: one number
    assert rows[0]["compile_fwd_s"] == 1.26 and json.loads(json.dumps(rows[0])) == rows[0]


def test_compile_fwd_s_is_checked_like_the_other_times_and_may_be_absent_in_older_files():
    with pytest.raises(ValueError, match="compile_fwd_s must be a finite number"):
        row(compile_fwd_s=-1.0)
    older = row(compile_s=2.0)
    del older["compile_fwd_s"]
    br.validate_row(older)


def test_markdown_table_backward_columns_and_wrong_results_are_flagged():
    rows = [row("flexattn", "full", 1.0, 3.0, rel_err=0.2), row("torch-flex", "full", 1.0, 2.0)]
    lines = br.markdown_table(rows).splitlines()
    head = cells(lines[0])
    got = dict(zip(head, cells(lines[2])))
    assert got["flexattn fwd"].endswith("WRONG") and "WRONG" not in got["torch-flex fwd"]
    assert "flexattn bwd" in head and got["flexattn / best peer bwd"] == "0.67×"


def test_deterministic_backward_cost_column_and_key():
    rows = [row("flexattn", "causal", 1.0, 3.0, bwd_det_ms=3.45), row("torch-flex", "causal", 1.0, 4.0),
            row("flexattn", "full", 1.0, 2.0)]
    lines = br.markdown_table(rows).splitlines()
    head = cells(lines[0])
    by_case = {c[0]: dict(zip(head, c)) for c in map(cells, lines[2:])}
    assert by_case["causal"]["flexattn deterministic bwd"] == "3.450 ms (+15.0 %)"
    assert by_case["full"]["flexattn deterministic bwd"] == "—"  # not measured for that row
    assert "flexattn deterministic bwd" not in cells(br.markdown_table(rows[1:]).splitlines()[0])
    with pytest.raises(ValueError, match="bwd_det_ms must be a finite number"):
        row(bwd=3.0, bwd_det_ms=-1.0)
    older = row(bwd=3.0)
    del older["bwd_det_ms"]  # results files from before session 18
    br.validate_row(older)


def test_device_slug():
    assert br.device_slug("NVIDIA H200") == "h200"
    assert br.device_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert br.device_slug("") == "unknown"


def test_progress_is_a_rewritten_line_on_a_terminal_and_plain_lines_in_a_log():
    log = io.StringIO()
    p = br.Progress(3, log)
    p.update("torch-flex causal: compiling")
    p.step()
    p.update("torch-flex causal: timing")
    assert log.getvalue().count("\n") == 2 and "[1/3" in log.getvalue().splitlines()[1]

    class Tty(io.StringIO):
        def isatty(self):
            return True
    tty = Tty()
    p = br.Progress(1, tty)
    p.update("compiling")
    p.close()
    assert "\n" not in tty.getvalue() and tty.getvalue().startswith("\r")


# ---- arguments ----------------------------------------------------------------------------------------
def test_defaults():
    a = run.parse_args([])
    assert a.suite == "quick" and a.reps == bc.DEFAULT_REPS["quick"] >= bc.MIN_REPS
    assert a.cases == bc.CASES and a.impls == bc.IMPLS and not a.backward
    assert run.parse_args(["--suite", "full"]).reps == bc.DEFAULT_REPS["full"]


def test_options_are_parsed():
    a = run.parse_args(["--suite", "full", "--cases", "causal,full", "--impls", "torch-flex,flexattn", "--backward",
                        "--out", "/tmp/x", "--reps", "30", "--compile-jobs", "1", "--no-warm"])
    assert a.cases == ("full", "causal") and a.impls == ("flexattn", "torch-flex")
    assert a.backward and a.out == "/tmp/x" and a.reps == 30 and a.compile_jobs == 1 and a.no_warm
    assert not a.deterministic and run.parse_args(["--backward", "--deterministic"]).deterministic


@pytest.mark.parametrize("argv, message", [
    (["--cases", "causal,bogus"], "--cases: unknown name bogus"),
    (["--impls", "xformers"], "--impls: unknown name xformers"),
    (["--reps", "5"], "--reps: at least 20"),
    (["--warmup", "-1"], "--warmup: expected >= 0"),
    (["--compile-jobs", "0"], "--compile-jobs: expected >= 1"),
    (["--suite", "decode", "--backward"], "--backward: the decode suite times the forward only"),
    (["--deterministic"], "--deterministic: times the backward in deterministic mode, so it needs --backward"),
    (["--impls", "sdpa-flash", "--cases", "document"], "run none of --cases document"),
    (["--suite", "medium"], "invalid choice: 'medium'"),
])
def test_bad_arguments_exit_2_naming_the_option(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        run.parse_args(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


# ---- outputs and --record -----------------------------------------------------------------------------
def a_run(tmp_path, rows):
    meta = {"date": "2026-12-02", "started": "2026-12-02T12:00:00Z", "device": "NVIDIA H200", "torch": "2.11.0",
            "triton": "3.6.0", "suite": "quick", "reps": 20, "commit": "unknown", "notes": ["a note"], "wall_s": 90}
    return {"meta": meta, "rows": rows, "decode_rows": []}


def test_finish_writes_the_files_and_prints_the_table_last(tmp_path, capsys):
    rows = [row("flexattn", "causal", 1.0, compile_s=1.0), row("torch-flex", "causal", 2.0)]
    rc = run.finish(a_run(tmp_path, rows), str(tmp_path))
    out = capsys.readouterr().out.rstrip("\n").splitlines()
    assert rc == 0
    assert out[-1].startswith("| causal |") and out[-3].startswith("| case |")
    assert "note: a note" in out
    saved = json.load(open(tmp_path / "results.json"))
    assert saved["rows"] == rows and saved["meta"]["device"] == "NVIDIA H200"
    assert "| causal |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "RESULTS-entry.md").read_text().startswith("## 2026-12-02 · NVIDIA H200 · suite quick")
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    assert (tmp_path / "chart.png").exists() == has_mpl
    if has_mpl:
        assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert any(line.startswith("note: no chart: matplotlib") for line in out)


def test_finish_fails_on_an_error_or_a_wrong_result(tmp_path, capsys):
    assert run.finish(a_run(tmp_path, [row(error="boom")]), str(tmp_path)) == 1
    assert run.finish(a_run(tmp_path, [row(rel_err=0.5)]), str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "error: flexattn causal S=2048 D=128: boom" in out and "WRONG: flexattn causal" in out


def test_record_keeps_the_latest_run_and_appends_the_history_once(tmp_path, capsys):
    src = tmp_path / "out"
    src.mkdir()
    doc = a_run(tmp_path, [row("flexattn", "full", 1.0), row("sdpa-cudnn", "full", 0.6)])
    (src / "results.json").write_text(json.dumps(doc))
    repo = tmp_path / "repo"
    assert run.record(str(src), str(repo)) == 0
    latest = json.load(open(repo / "bench" / "results" / "h200-latest.json"))
    assert latest["rows"] == doc["rows"] and latest["meta"]["commit"] != "unknown"
    history = (repo / "bench" / "RESULTS.md").read_text()
    assert history.startswith("# Benchmark history") and history.count("## 2026-12-02 · NVIDIA H200") == 1
    assert "| full | 4×16×2048 | 128 | 1.000 |" in history
    assert run.record(str(src / "results.json"), str(repo)) == 0  # the same run again: not appended twice
    assert (repo / "bench" / "RESULTS.md").read_text().count("## 2026-12-02") == 1


def test_record_merges_an_attention_run_and_a_decode_run_of_one_session(tmp_path):
    long_dir, dec_dir = tmp_path / "long", tmp_path / "dec"
    long_dir.mkdir()
    dec_dir.mkdir()
    a = a_run(tmp_path, [row("flexattn", "full", 1.0)])
    a["meta"].update(suite="long", commit="abc1234")
    d = a_run(tmp_path, [])
    d["meta"].update(suite="decode", commit="abc1234", started="2026-12-02T12:05:00Z", notes=["decode note"])
    d["decode_rows"] = [{"impl": "flexattn", "case": "decode", "B": 8, "Hq": 32, "Hkv": 8, "S": 8192, "D": 128, "page": 0,
                         "window": 0, "ms": 0.077, "GBps": 3500.0, "error": None}]
    (long_dir / "results.json").write_text(json.dumps(a))
    (dec_dir / "results.json").write_text(json.dumps(d))
    repo = tmp_path / "repo"
    assert run.record([str(long_dir), str(dec_dir)], str(repo)) == 0
    latest = json.load(open(repo / "bench" / "results" / "h200-latest.json"))
    assert latest["rows"] == a["rows"] and latest["decode_rows"] == d["decode_rows"]
    assert latest["meta"]["suite"] == "long+decode" and latest["meta"]["notes"] == ["a note", "decode note"]
    assert [r["suite"] for r in latest["meta"]["runs"]] == ["long", "decode"]
    d["meta"]["commit"] = "fff0000"
    (dec_dir / "results.json").write_text(json.dumps(d))
    with pytest.raises(ValueError, match="--record: the runs differ in commit"):
        run.record([str(long_dir), str(dec_dir)], str(repo))


def test_record_of_one_kind_of_rows_keeps_the_other_kind_from_the_latest_file(tmp_path):
    long_dir, dec_dir, dec2_dir = tmp_path / "long", tmp_path / "dec", tmp_path / "dec2"
    for d in (long_dir, dec_dir, dec2_dir):
        d.mkdir()
    a = a_run(tmp_path, [row("flexattn", "full", 1.0)])
    a["meta"].update(suite="long", commit="abc1234")
    d = a_run(tmp_path, [])
    d["meta"].update(suite="decode", commit="def5678", started="2026-12-07T12:00:00Z", notes=[])
    d["decode_rows"] = [{"impl": "flexattn", "case": "decode", "B": 8, "Hq": 32, "Hkv": 8, "S": 8192, "D": 128, "page": 0,
                         "window": 0, "ms": 0.077, "GBps": 3500.0, "error": None}]
    (long_dir / "results.json").write_text(json.dumps(a))
    (dec_dir / "results.json").write_text(json.dumps(d))
    repo = tmp_path / "repo"
    assert run.record(str(long_dir), str(repo)) == 0
    assert run.record(str(dec_dir), str(repo)) == 0
    latest = json.load(open(repo / "bench" / "results" / "h200-latest.json"))
    assert latest["rows"] == a["rows"] and latest["decode_rows"] == d["decode_rows"]
    assert latest["meta"]["commit"] == "def5678" and latest["meta"]["suite"] == "decode"
    origin = {"kind": "rows", "suite": "long", "started": "2026-12-02T12:00:00Z", "commit": "abc1234"}
    assert latest["meta"]["carried"] == [origin]
    assert latest["meta"]["notes"] == ["rows carried from the run of 2026-12-02T12:00:00Z (suite long, commit abc1234)"]
    history = (repo / "bench" / "RESULTS.md").read_text()
    decode_section = history[history.index("commit def5678"):]
    assert "| full |" not in decode_section, "the history's section is the new run alone"
    # A second decode-only record: the rows still name the run they came from.
    d["meta"].update(commit="0a0b0c0", started="2026-12-08T12:00:00Z")
    (dec2_dir / "results.json").write_text(json.dumps(d))
    assert run.record(str(dec2_dir), str(repo)) == 0
    latest = json.load(open(repo / "bench" / "results" / "h200-latest.json"))
    assert latest["rows"] == a["rows"] and latest["meta"]["carried"] == [origin]
    # Another device's file is never mixed in.
    other = a_run(tmp_path, [])
    other["meta"].update(device="NVIDIA H100 80GB HBM3", suite="decode", started="2026-12-09T12:00:00Z")
    other["decode_rows"] = d["decode_rows"]
    (dec2_dir / "results.json").write_text(json.dumps(other))
    assert run.record(str(dec2_dir), str(repo)) == 0
    h100 = json.load(open(repo / "bench" / "results" / "h100-80gb-hbm3-latest.json"))
    assert h100["rows"] == [] and "carried" not in h100["meta"]


def test_the_meta_names_the_switches_a_run_was_made_with():
    env = {"FLEXATTN_DECODE_EVICT_FIRST": "1", "FLEXATTN_CACHE_DIR": "/x", "FLEXATTN_NATIVE_DIR": "/y",
           "FLEXATTN_REQUIRE_NATIVE": "1", "PATH": "/bin", "FLEXATTN_DECODE_TMA_BOX": "16"}
    assert run.flexattn_env(env) == {"FLEXATTN_DECODE_EVICT_FIRST": "1", "FLEXATTN_DECODE_TMA_BOX": "16"}


def test_record_rejects_a_file_that_is_not_a_run(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="--record: .* is not a bench/run.py results file"):
        run.record(str(tmp_path), str(tmp_path))
    bad = a_run(tmp_path, [dict(row(), impl="cutlass")])
    (tmp_path / "results.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="row: impl must be one of"):
        run.record(str(tmp_path), str(tmp_path))


def test_git_commit_marks_a_dirty_tree_and_honours_the_override(tmp_path, monkeypatch):
    import subprocess
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no git")
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "f.txt").write_text("a\n")
    subprocess.run(git + ["add", "f.txt"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    monkeypatch.delenv("FLEXATTN_COMMIT", raising=False)
    clean = run.git_commit(str(repo))
    assert clean and not clean.endswith("+dirty")
    (repo / "f.txt").write_text("b\n")
    assert run.git_commit(str(repo)) == clean + "+dirty"
    monkeypatch.setenv("FLEXATTN_COMMIT", "abc1234")
    assert run.git_commit(str(repo)) == "abc1234"
