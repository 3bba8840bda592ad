"""Shared by the torch test files (imported after their skips: torch and flexattn._C present): the dense float64
definition the CPU results are compared with, and the markers of what this torch's Dynamo supports."""
import math

import pytest
import torch

from flexattn import _dynamo_parts, _torch_api

flex = _torch_api.flex_attention
# Mods made inside compiled code reach the plan taken apart, which needs Dynamo to hand objects over (torch >= 2.15)
needs_parts = pytest.mark.skipif(not _dynamo_parts.supported(), reason="this torch's Dynamo cannot hand objects to "
                                 "assume_constant_result: mods made inside compiled code are not supported")


def dense(q, k, v, score=None, mask=None, scale=None):
    """softmax(score(q k^T * scale) | mask) v with autograd, GQA and batch broadcast (the definition)."""
    B, Hq, L, E = q.shape
    G = Hq // k.shape[1]
    k = k.repeat_interleave(G, 1).expand(B, -1, -1, -1)
    v = v.repeat_interleave(G, 1).expand(B, -1, -1, -1)
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(E) if scale is None else scale)
    idx = (torch.arange(B).view(-1, 1, 1, 1), torch.arange(Hq).view(1, -1, 1, 1),
           torch.arange(L).view(1, 1, -1, 1), torch.arange(k.shape[2]).view(1, 1, 1, -1))
    if score is not None:
        s = score(s, *idx)
    if mask is not None:
        s = torch.where(mask(*idx), s, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.where(lse[..., None] == -math.inf, 0.0, torch.exp(s - lse[..., None]))
    return p @ v, lse


def rand(*shape, dtype=torch.float64, grad=True):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)
