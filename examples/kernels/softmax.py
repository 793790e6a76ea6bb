"""Fused row softmax written in ember's kernel language (Triton's tutorial kernel, ported by
renaming ``triton.language`` to ``ember.kernel``).

    PYTHONPATH=. python examples/kernels/softmax.py
"""

from __future__ import annotations

import ember
import ember.kernel as tl


@tl.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols,
                   BLOCK: tl.constexpr):  # noqa: N803
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def softmax(x: ember.Tensor) -> ember.Tensor:
    """Softmax over the last dim of a 2-D tensor, one program per row."""
    rows, cols = x.shape
    out = ember.empty_like(x)
    softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols,
                            BLOCK=next_power_of_2(cols))
    return out


if __name__ == "__main__":
    x = ember.randn(4, 7)
    print(softmax(x))
    print(ember.softmax(x, dim=-1))
