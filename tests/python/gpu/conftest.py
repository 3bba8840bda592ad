"""GPU tier of the Python tests: flexattn on CUDA tensors against torch.nn.attention.flex_attention.
Skipped without a CUDA device, torch or the compiled extension. Each test adds rows to one summary table,
printed at the end of the run (pytest -q tests/python/gpu)."""
import time

import pytest

ROWS = []


class Report:
    def __init__(self, test):
        self.test = test

    def row(self, case, metric, ours, torch_bf16, limit, seconds=None):
        """One comparison: our error and torch's same-precision error against the float64 reference."""
        ROWS.append((case, metric, ours, torch_bf16, limit, ours <= limit, seconds))
        return ours <= limit


@pytest.fixture
def report(request):
    start = time.time()
    r = Report(request.node.name)
    yield r
    r.seconds = time.time() - start


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    w = terminalreporter
    w.section("flexattn vs torch flex_attention (max abs error vs the float64 reference)")
    w.write_line(f"{'case':<34} {'metric':<10} {'flexattn':>10} {'torch-same':>10} {'limit':>10}  ok")
    for case, metric, ours, base, limit, ok, _ in ROWS:
        base_s = "-" if base is None else f"{base:10.2e}"
        w.write_line(f"{case:<34} {metric:<10} {ours:10.2e} {base_s:>10} {limit:10.2e}  {'ok' if ok else 'FAIL'}")
    bad = sum(1 for r in ROWS if not r[5])
    w.write_line(f"comparisons: {len(ROWS) - bad} ok, {bad} over the limit")
