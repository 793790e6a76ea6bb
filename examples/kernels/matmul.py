"""A tiled matrix product with a fused epilogue (``relu(a @ b + bias)``) written in ember's
kernel language: a 2-D grid of (BLOCK_M, BLOCK_N) output tiles, a loop over K in BLOCK_K steps
accumulating ``dot`` products in float32, then bias and activation before the one store.

    PYTHONPATH=. python examples/kernels/matmul.py
"""

from __future__ import annotations

import ember
import ember.kernel as tl


@tl.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,  # noqa: N803
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,  # noqa: N803
                  ACTIVATION: tl.constexpr):  # noqa: N803
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc + bias[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc, mask=mask)


def matmul_bias_act(a: ember.Tensor, b: ember.Tensor, bias: ember.Tensor,
                    activation: str = "relu") -> ember.Tensor:
    """``act(a @ b + bias)`` for 2-D ``a`` (M, K), ``b`` (K, N), ``bias`` (N,)."""
    M, K = a.shape  # noqa: N806
    N = b.shape[1]  # noqa: N806
    c = ember.empty(M, N, dtype=a.dtype)

    def grid(meta: dict) -> tuple:
        return (tl.cdiv(M, meta["BLOCK_M"]), tl.cdiv(N, meta["BLOCK_N"]))

    matmul_kernel[grid](a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                        b.stride(1), c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32,
                        BLOCK_K=32, ACTIVATION=activation)
    return c


if __name__ == "__main__":
    a, b, bias = ember.randn(50, 70), ember.randn(70, 40), ember.randn(40)
    print((matmul_bias_act(a, b, bias) - ember.relu(a @ b + bias)).abs().max())
