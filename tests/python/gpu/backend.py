"""What the GPU tier's modules need first: torch with a CUDA device and flexattn's cuda backend, or a
module-level skip saying which is missing. Call at the top of a test module: `torch, C = require()`."""
import pytest


def require():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device", allow_module_level=True)
    from flexattn import _native

    C = _native.load()
    if C is None or not C.cuda_available()[0]:
        pytest.skip(f"flexattn cuda backend unavailable: {_native.error() or C.cuda_available()[1]}",
                    allow_module_level=True)
    return torch, C
