"""The suite's stand-in for FlagGems' kernels: each op rebuilt from other torch primitives."""

from __future__ import annotations

import math

import torch

# Reduction block of sum_via_gemv: the reduced dim is cut into blocks of (a divisor of) this.
SUM_BLOCK = 1024


def add_into_empty(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b written into a freshly allocated output through torch.add(out=)."""
    out = torch.empty_like(a)
    torch.add(a, b, out=out)
    return out


def tanh_via_exp(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) = 1 - 2 / (exp(2x) + 1), in float32 and in place (not differentiable)."""
    # Upcast like a GPU kernel would; exp overflowing to inf still gives exactly 1.
    t = torch.mul(x.float(), 2.0)
    t.exp_().add_(1.0).reciprocal_().mul_(-2.0).add_(1.0)
    return t.to(x.dtype)


def mm_column_major(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with b first copied to column-major: the copy is part of the op's cost."""
    return torch.matmul(a, b.t().contiguous().t())


def softmax_via_exp(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """exp(x - max) / sum(exp(x - max)) along dim, in float32."""
    if dim is None:  # torch's legacy implicit dim, as F.softmax picks it
        dim = 0 if x.ndim in (0, 1, 3) else 1
    y = x.float()
    e = y.sub(y.amax(dim, keepdim=True)).exp_()
    e.div_(e.sum(dim, keepdim=True))
    return e.to(x.dtype)


def sum_via_gemv(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum over dim (everything when None) as a blocked gemv with ones, in float32."""
    rows = x.reshape(-1) if dim is None else x.movedim(dim, -1)
    acc = rows.float()
    n = acc.shape[-1]
    block = math.gcd(n, SUM_BLOCK)
    blocks = acc.reshape(*acc.shape[:-1], n // block, block)
    partial = torch.matmul(blocks, torch.ones(block, dtype=acc.dtype, device=acc.device))
    return partial.sum(-1).to(x.dtype)
