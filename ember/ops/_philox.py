"""The Philox4x32-10 stream and its maps to numbers: the NumPy reference of ``docs/random.md``.

Everything here is vectorized over elements (uint32/uint64 NumPy arithmetic) and specified
exactly, so the C backend draws the same bits: a stream is keyed by a 64-bit ``seed``; its
32-bit word ``w`` is lane ``w % 4`` of Philox4x32-10 applied to the 128-bit counter ``w // 4``
with key ``(seed & 0xffffffff, seed >> 32)``.  An op drawing ``n`` words from ``offset`` uses
words ``offset .. offset + n - 1``.
"""

from __future__ import annotations

import numpy as np

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = 0x9E3779B9
_W1 = 0xBB67AE85
_S32 = np.uint64(32)


def _rounds(c0: np.ndarray, c1: np.ndarray, c2: np.ndarray, c3: np.ndarray, k0: int, k1: int,
            rounds: int = 10) -> tuple:
    """Philox4x32 rounds on uint32 lanes.  A 32x32 -> 64-bit product is one uint64 multiply;
    its high and low words are read through a uint32 view (no shifts or masks)."""
    for r in range(rounds):
        if r:
            k0 = (k0 + _W0) & 0xFFFFFFFF
            k1 = (k1 + _W1) & 0xFFFFFFFF
        p0 = np.multiply(c0, _M0, dtype=np.uint64).view(np.uint32).reshape(-1, 2)
        p1 = np.multiply(c2, _M1, dtype=np.uint64).view(np.uint32).reshape(-1, 2)
        c0 = p1[:, _HI] ^ c1
        c0 ^= np.uint32(k0)
        c2 = p0[:, _HI] ^ c3
        c2 ^= np.uint32(k1)
        c1 = p1[:, _LO]
        c3 = p0[:, _LO]
    return c0, c1, c2, c3


_LO, _HI = (0, 1) if np.little_endian else (1, 0)


def philox4x32(ctr: np.ndarray, key: tuple[int, int], rounds: int = 10) -> np.ndarray:
    """Philox4x32 of each counter row: ``ctr`` is ``(n, 4)`` uint32, ``key`` two 32-bit ints;
    returns ``(n, 4)`` uint32 (Salmon et al. 2011, as in Random123)."""
    ctr = np.asarray(ctr, dtype=np.uint32)
    lanes = _rounds(*(np.ascontiguousarray(ctr[:, i]) for i in range(4)),
                    key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF, rounds)
    return np.stack(lanes, axis=1)


def random_words(seed: int, offset: int, n: int) -> np.ndarray:
    """Words ``offset .. offset + n - 1`` of the stream keyed by ``seed`` (uint32, shape (n,))."""
    if n <= 0:
        return np.zeros(0, np.uint32)
    if n <= _SMALL:
        return _words_small(seed, offset, n)
    first = offset // 4
    last = (offset + n - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    c0 = blocks.astype(np.uint32)              # the low limb (wraps mod 2**32)
    c1 = (blocks >> _S32).astype(np.uint32) if last >> 32 else np.zeros(blocks.size, np.uint32)
    zero = np.zeros(blocks.size, np.uint32)
    lanes = _rounds(c0, c1, zero, zero, seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    words = np.empty((blocks.size, 4), np.uint32)
    for i, lane in enumerate(lanes):
        words[:, i] = lane
    start = offset - first * 4
    return words.reshape(-1)[start:start + n]


# A few words are cheaper with Python ints (~8 us a block) than with ~60 NumPy calls on tiny
# arrays (~100 us); both compute the same function (tests check both against the spec).
_SMALL = 32


def _words_small(seed: int, offset: int, n: int) -> np.ndarray:
    ks0, ks1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    first, last = offset // 4, (offset + n - 1) // 4
    out: list[int] = []
    for b in range(first, last + 1):
        c0, c1, c2, c3 = b & 0xFFFFFFFF, b >> 32, 0, 0
        k0, k1 = ks0, ks1
        for _ in range(10):
            p0, p1 = c0 * 0xD2511F53, c2 * 0xCD9E8D57
            c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF,
                              (p0 >> 32) ^ c3 ^ k1, p0 & 0xFFFFFFFF)
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        out += (c0, c1, c2, c3)
    start = offset - first * 4
    return np.array(out[start:start + n], np.uint32)


# ------------------------------------------------------------------------ words -> numbers
# Uniform [0, 1) with as many random bits as the dtype's significand holds, so every value is
# exact in the dtype and 1.0 never appears.
_UNIT_BITS = {"float16": 11, "bfloat16": 8, "float32": 24}


def words_per_uniform(dtype_name: str) -> int:
    """float64 uniforms take two words (53 bits); every other dtype one."""
    return 2 if dtype_name == "float64" else 1


def unit_uniform(words: np.ndarray, dtype_name: str) -> np.ndarray:
    """Uniform [0, 1) doubles from words (two per value for float64, one otherwise)."""
    if dtype_name == "float64":
        a = words[0::2].astype(np.uint64) >> np.uint64(5)
        b = words[1::2].astype(np.uint64) >> np.uint64(6)
        return (a * np.uint64(1 << 26) + b).astype(np.float64) * 2.0 ** -53
    bits = _UNIT_BITS.get(dtype_name, 24)
    return (words >> np.uint32(32 - bits)).astype(np.float64) * 2.0 ** -bits


def unit_open_closed(words: np.ndarray, dtype_name: str) -> np.ndarray:
    """Uniform (0, 1]: ``1 - unit_uniform`` (safe to take the log of)."""
    return 1.0 - unit_uniform(words, dtype_name)


def standard_normal(words: np.ndarray, n: int, dtype_name: str) -> np.ndarray:
    """``n`` N(0, 1) doubles by Box-Muller on pairs of uniforms: pair ``k`` uses
    ``u1 = (0, 1]`` from its first uniform and ``u2 = [0, 1)`` from its second, and gives
    elements ``2k`` (``r cos``) and ``2k + 1`` (``r sin``), ``r = sqrt(-2 log u1)``."""
    per = words_per_uniform(dtype_name)
    w = words.reshape(-1, 2 * per)
    u1 = unit_open_closed(w[:, :per].reshape(-1), dtype_name)
    u2 = unit_uniform(w[:, per:].reshape(-1), dtype_name)
    r = np.sqrt(-2.0 * np.log(u1))
    theta = 2.0 * np.pi * u2
    z = np.empty((u1.size, 2), np.float64)
    z[:, 0] = r * np.cos(theta)
    z[:, 1] = r * np.sin(theta)
    return z.reshape(-1)[:n]


def normal_words(n: int, dtype_name: str) -> int:
    return ((n + 1) // 2) * 2 * words_per_uniform(dtype_name)


def unit32(words: np.ndarray) -> np.ndarray:
    """``w * 2**-32`` in [0, 1): the uniform that Bernoulli draws (and dropout) compare with."""
    return words.astype(np.float64) * 2.0 ** -32


def uint64_pairs(words: np.ndarray) -> np.ndarray:
    """``(w[2i] << 32) | w[2i + 1]`` as uint64."""
    return (words[0::2].astype(np.uint64) << _S32) | words[1::2].astype(np.uint64)
