"""Runs the tests against python/flexattn in this checkout (no install needed)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import flexattn  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_cache():
    flexattn.clear_cache()
    yield


def grids(B=2, H=3, L=7, S=9):
    """Broadcast index grids [B,1,1,1], [1,H,1,1], [1,1,L,1], [1,1,1,S]."""
    import numpy as np

    return (np.arange(B)[:, None, None, None], np.arange(H)[None, :, None, None],
            np.arange(L)[None, None, :, None], np.arange(S)[None, None, None, :])
