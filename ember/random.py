"""Random number generation: Philox4x32-10 streams and the ``Generator`` that owns them.

ember's randomness is counter based (ARCHITECTURE.md §3): a generator is a ``(seed, offset)``
pair, and every random op draws the 32-bit words ``offset, offset + 1, ...`` of the Philox
stream keyed by ``seed``.  The op records the seed and offset it consumed as parameters, so a
replay (or the compiled C version of the same graph) draws bit-identical numbers.  The stream is
specified in ``docs/random.md``; ``ember/ops/_philox.py`` is its NumPy reference
implementation and ``ember/ops/random.py`` holds the random ops.

ember does not reproduce PyTorch's Mersenne-Twister numbers; ``ember.manual_seed(0)`` makes
ember's own numbers reproducible.

>>> import ember
>>> g = ember.Generator().manual_seed(0)
>>> a = ember.rand(3, generator=g)
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import numpy as np

from ember import dtypes as _dt
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError
from ember.ops._philox import philox4x32, random_words  # noqa: F401
from ember.tensor import Tensor, _wrap

__all__ = [
    "Generator", "default_generator", "fork_rng", "get_rng_state", "initial_seed",
    "manual_seed", "philox4x32", "random_words", "seed", "set_rng_state",
]

# ------------------------------------------------------------------------------- Generator
_U64 = 1 << 64
DEFAULT_SEED = 67280421310721   # PyTorch's default seed for a fresh Generator
_STATE_BYTES = 16              # seed (uint64 LE) + offset (uint64 LE)


def _check_seed(value: Any, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise EmberRuntimeError(f"[{op}] manual_seed expected a long, but got "
                                f"{type(value).__name__}")
    v = int(value)
    if not -(1 << 63) <= v < _U64:
        raise EmberValueError(f"[{op}] Overflow when unpacking long long: seed {v} is outside "
                              f"[-2**63, 2**64)")
    return v % _U64


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


class Generator:
    """A Philox stream position: ``(seed, offset)``.  ``offset`` counts 32-bit words drawn.

    >>> g = ember.Generator()
    >>> g.manual_seed(42).initial_seed()
    42
    """

    __slots__ = ("_seed", "_offset", "_device")

    def __init__(self, device: Any = "cpu") -> None:
        from ember.device import check_device
        check_device(device, "Generator")
        self._seed = DEFAULT_SEED
        self._offset = 0
        self._device = device

    @property
    def device(self) -> Any:
        from ember.device import CPU
        return CPU

    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream at offset 0 of ``seed``; returns ``self``."""
        self._seed = _check_seed(seed, "manual_seed")
        self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from the OS entropy pool; returns the new seed."""
        self._seed = _fresh_seed()
        self._offset = 0
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_offset(self) -> int:
        return self._offset

    def set_offset(self, offset: int) -> Generator:
        if offset < 0 or offset % 4:
            raise EmberRuntimeError(f"[set_offset] offset must be a non-negative multiple of 4, "
                                    f"got {offset}")
        self._offset = int(offset)
        return self

    def clone_state(self) -> Generator:
        """A new generator at the same stream position."""
        g = Generator()
        g._seed, g._offset = self._seed, self._offset
        return g

    def get_state(self) -> Tensor:
        """The state as a uint8 tensor: seed then offset, each a little-endian uint64."""
        raw = self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little")
        return _wrap(np.frombuffer(raw, np.uint8).copy(), _dt.uint8)

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state returned by ``get_state``."""
        if not isinstance(new_state, Tensor) or new_state.dtype is not _dt.uint8:
            raise EmberTypeError("[set_state] RNG state must be an ember.ByteTensor (uint8)")
        raw = np.ascontiguousarray(new_state._data).reshape(-1)
        if raw.size != _STATE_BYTES:
            raise EmberRuntimeError(f"[set_state] expected an RNG state of {_STATE_BYTES} bytes "
                                    f"but found the input RNG state size to be {raw.size}")
        b = raw.tobytes()
        self._seed = int.from_bytes(b[:8], "little")
        self._offset = int.from_bytes(b[8:], "little")
        return self

    def _consume(self, nwords: int) -> tuple[int, int]:
        """Reserve ``nwords`` words; returns the ``(seed, offset)`` an op draws them from.  The
        offset advances by ``nwords`` rounded up to a multiple of 4 (whole Philox blocks)."""
        off = self._offset
        self._offset = off + ((nwords + 3) & ~3)
        return self._seed, off

    def __repr__(self) -> str:
        return f"<ember.Generator seed={self._seed} offset={self._offset}>"


default_generator = Generator()
default_generator.seed()   # PyTorch seeds the default generator nondeterministically


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (``ember.manual_seed(0)``); returns it."""
    if isinstance(seed, float):
        seed = int(seed)   # torch.manual_seed(1.5) seeds with 1
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator nondeterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, **_: Any) -> Iterator[None]:
    """Restore the default generator's state on exit."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def resolve(generator: Generator | None) -> Generator:
    """``generator`` or the default one; a clear error for anything else."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise EmberTypeError(f"expected an ember.Generator, got {type(generator).__name__}")
    return generator
