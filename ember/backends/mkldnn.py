"""``ember.backends.mkldnn``: ember does not use oneDNN, so ``is_available()`` is False (a CPU
PyTorch build says True; False keeps scripts off ``to_mkldnn`` paths ember lacks).  ``enabled``
is stored only."""

enabled = True


def is_available() -> bool:
    return False
