"""``ember.backends.cpu``: the CPU capability string PyTorch reports."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT' from the CPU's flags (Linux), as PyTorch names them."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return "DEFAULT"
    if " avx512f" in flags and " avx512bw" in flags:
        return "AVX512"
    if " avx2" in flags:
        return "AVX2"
    return "DEFAULT"
