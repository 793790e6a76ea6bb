"""OpInfo entries for the storage primitives of functionalized in-place writes
(``ember/ops/storage.py``), checked against torch's ``as_strided`` / ``as_strided_scatter`` on a
contiguous copy (offsets count from the start of the storage value)."""

from __future__ import annotations

from tests.opinfo.core import ALL, ErrorCase, OpInfo, Sample, make

GEOMS = [
    ((2, 3), (4, 1), 1),        # a block
    ((3,), (5,), 0),            # a diagonal of a 3x4... as strided positions
    ((4, 2), (1, 4), 0),        # transposed
    ((0, 3), (3, 1), 0),        # empty
    ((), (), 5),                # one element
]


def _read_samples(dtype, rng):
    for g in GEOMS:
        yield Sample((make((3, 4), dtype, rng),), {"geom": g}, desc=str(g))
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"geom": GEOMS[0]},
                 desc="noncontig storage", noncontig=True)


def _write_samples(dtype, rng):
    for g in GEOMS:
        yield Sample((make((3, 4), dtype, rng), make(g[0], dtype, rng)), {"geom": g}, desc=str(g))


def _read(lib, x, geom):
    if lib.__name__ == "torch":
        return lib.as_strided(x.contiguous().clone(), geom[0], geom[1], geom[2]).clone()
    from ember.ops.registry import bind
    from ember.ops.storage import STORAGE_READ
    return bind(STORAGE_READ, x, geom=geom)


def _write(lib, x, src, geom):
    if lib.__name__ == "torch":
        return lib.as_strided_scatter(x.contiguous().clone(), src, geom[0], geom[1], geom[2])
    from ember.ops.registry import bind
    from ember.ops.storage import STORAGE_WRITE
    return bind(STORAGE_WRITE, x, src, geom=geom)


def _read_errors():
    import numpy as np
    x = np.zeros((3, 4), np.float32)
    return [ErrorCase((x,), {"geom": ((2, 3), (4, 1), 6)}, exc=RuntimeError,
                      match=r"\[storage_read\] geometry .* does not fit a storage of 12")]


OPINFOS = [
    OpInfo("storage_read", _read, _read_samples, dtypes=ALL, grad=False, errors=_read_errors),
    OpInfo("storage_write", _write, _write_samples, dtypes=ALL, grad=False),
]
