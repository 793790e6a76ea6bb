"""``ember.backends.mkl``: ember's matmuls call OpenBLAS (see docs/compile.md), not MKL, so
``is_available()`` is False."""


def is_available() -> bool:
    return False
