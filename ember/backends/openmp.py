"""``ember.backends.openmp``: ember's compiled C code runs its loops with OpenMP."""


def is_available() -> bool:
    return True
