"""Layer norm over the last dim written in ember's kernel language: one program per row,
mean and variance in float32, then the affine epilogue, in one pass over the row.

    PYTHONPATH=. python examples/kernels/layer_norm.py
"""

from __future__ import annotations

import ember
import ember.kernel as tl


@tl.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stride, n_cols, eps,
                      BLOCK: tl.constexpr):  # noqa: N803
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, xc * rstd * w + b, mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def layer_norm(x: ember.Tensor, weight: ember.Tensor, bias: ember.Tensor,
               eps: float = 1e-5) -> ember.Tensor:
    """``F.layer_norm(x, (N,), weight, bias, eps)`` for a 2-D contiguous ``x``."""
    rows, cols = x.shape
    y = ember.empty_like(x)
    layer_norm_kernel[(rows,)](x, weight, bias, y, x.stride(0), cols, eps,
                               BLOCK=next_power_of_2(cols))
    return y


if __name__ == "__main__":
    x, w, b = ember.randn(4, 10), ember.randn(10), ember.randn(10)
    print(layer_norm(x, w, b))
    print(ember.nn.functional.layer_norm(x, (10,), w, b))
