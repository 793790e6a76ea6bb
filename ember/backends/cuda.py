"""``ember.backends.cuda``: CUDA's flags, stored (ember has no CUDA: ``is_built()`` is False).

``matmul.allow_tf32`` mirrors ``ember.get_float32_matmul_precision() != "highest"`` as in
PyTorch; the scaled-dot-product-attention switches are stored and reported.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ember.backends import _state


def is_built() -> bool:
    """False: ember was not built with CUDA."""
    return False


class _MatmulFlags:
    """``ember.backends.cuda.matmul``: ``allow_tf32`` and the reduced-precision switches."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True
    allow_fp16_accumulation = False

    @property
    def allow_tf32(self) -> bool:
        return _state.float32_matmul_precision != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _state.float32_matmul_precision = "high" if value else "highest"


matmul = _MatmulFlags()
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled() -> bool:
    return _SDP["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _SDP["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _SDP["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _SDP["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _SDP["math"]


def enable_math_sdp(enabled: bool) -> None:
    _SDP["math"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _SDP["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _SDP["cudnn"] = bool(enabled)


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True) -> Iterator[None]:
    """PyTorch's deprecated switch of attention kernels: stored for the block (ember's
    attention kernel does not depend on it)."""
    old = dict(_SDP)
    _SDP.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient,
                cudnn=enable_cudnn)
    try:
        yield
    finally:
        _SDP.update(old)
