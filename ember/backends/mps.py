"""``ember.backends.mps``: ember has no Metal backend."""


def is_available() -> bool:
    """False: ember computes on the CPU."""
    return False


def is_built() -> bool:
    return False
