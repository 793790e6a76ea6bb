"""placeholder"""


def save(ep, f, extra_files=None):  # noqa
    raise NotImplementedError


def load(f, extra_files=None):  # noqa
    raise NotImplementedError
