"""OpInfo entries for reductions."""

from __future__ import annotations

from tests.opinfo.core import ALL, OpInfo, Sample, make, standard_shapes


def reduce_samples(dtype, rng):
    for shape in standard_shapes():
        yield Sample((make(shape, dtype, rng),), desc=f"all {shape}")
    x = make((2, 3, 4), dtype, rng)
    for dim in (0, -1, (0, 2)):
        for keepdim in (False, True):
            yield Sample((x,), {"dim": dim, "keepdim": keepdim}, desc=f"dim={dim} k={keepdim}")
    yield Sample((make((3, 4), dtype, rng, noncontig=True),), {"dim": 1}, desc="non-contiguous")


OPINFOS = [
    OpInfo("sum", lambda t, x, **kw: t.sum(x, **kw), reduce_samples, dtypes=ALL),
]
