"""`import flexattn` works without torch and without the compiled extension, and never imports torch."""
import os
import subprocess
import sys

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


def run(code):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_import_with_torch_blocked_and_run_the_numpy_path():
    r = run("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, flexattn\n"
            "from flexattn import _native; _native.load()\n"
            "bm = flexattn.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 64, 64, BLOCK_SIZE=16)\n"
            "x = np.ones((1, 1, 64, 8), np.float32)\n"
            "out = flexattn.flex_attention(x, x, x, block_mask=bm)\n"
            "assert isinstance(bm.kv_indices, np.ndarray) and out.shape == (1, 1, 64, 8)\n"
            "print('ok')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_import_does_not_import_torch_or_the_extension():
    r = run("import sys, flexattn\n"
            "print('torch' in sys.modules, 'flexattn._C' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_missing_extension_is_reported_not_raised_unless_required():
    r = run("import os\nos.environ['FLEXATTN_NATIVE_DIR'] = '/nonexistent'\nos.environ['FLEXATTN_REQUIRE_NATIVE'] = ''\n"
            "from flexattn import _native\nassert _native.load() is None\nprint(_native.error())")
    assert r.returncode == 0, r.stderr
    assert "no _C extension" in r.stdout and "FLEXATTN_NATIVE_DIR=/nonexistent" in r.stdout
    r = run("import os\nos.environ['FLEXATTN_NATIVE_DIR'] = '/nonexistent'\nos.environ['FLEXATTN_REQUIRE_NATIVE'] = '1'\n"
            "from flexattn import _native\n_native.load()")
    assert r.returncode != 0 and "FLEXATTN_REQUIRE_NATIVE=1 but flexattn._C could not be loaded" in r.stderr
    # any flag word, as the docs' every flag (it compared with "1" only: `true` was silently ignored)
    r = run("import os\nos.environ['FLEXATTN_NATIVE_DIR'] = '/nonexistent'\nos.environ['FLEXATTN_REQUIRE_NATIVE'] = 'True'\n"
            "from flexattn import _native\n_native.load()")
    assert r.returncode != 0 and "FLEXATTN_REQUIRE_NATIVE=True but flexattn._C could not be loaded" in r.stderr


def test_the_version_is_the_same_in_its_three_places():
    """pyproject.toml (the wheel), CMakeLists.txt (_C.__version__) and the package: written thrice, checked here."""
    import pathlib
    import re

    import flexattn

    root = pathlib.Path(__file__).resolve().parents[2]
    wheel = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
    native = re.search(r"project\(\w+[^)]*VERSION ([0-9.]+)", (root / "CMakeLists.txt").read_text()).group(1)
    assert wheel == native == flexattn.__version__
