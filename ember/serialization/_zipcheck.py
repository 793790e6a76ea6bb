"""Refusal rules and limits shared by every zip loader (``ember.load``, the PyTorch ``.pt``
reader, ``ember.export.load``): an archive that two zip parsers could read differently, or
whose entries would expand beyond a budget, is refused before any entry is decompressed.

The rules (docs/serialization.md, "Refusal rules and limits"):

* no two entries with the same name (``zipfile`` serves the last, others the first);
* no entry name that is a path (absolute, a drive, a backslash, a ``..`` component);
* no encrypted entry, no compression other than stored and deflate;
* each entry's local header agrees with the central directory on the name, the compression
  method and (unless a data descriptor follows the data) the CRC and sizes, and the entries'
  bytes do not overlap one another or the central directory;
* a stored entry's size equals its compressed size; a deflated entry declares no more than
  ``max_ratio`` times its compressed size (deflate cannot expand further);
* metadata entries (pickles, JSON, version records) are at most ``max_metadata_bytes``, the
  declared sizes of all compressed entries together at most ``max_inflated_bytes``.

Entries are then read in chunks of ``chunk_bytes`` into a buffer of the declared size, and a
stream that produces more (or fewer) bytes than declared is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ember.serialization._errors import SerializationError

_DEFLATE_MAX_RATIO = 1032  # the most a deflate stream can expand (258-byte matches in 2 bits)


@dataclasses.dataclass
class ArchiveLimits:
    """The budgets every zip loader enforces; change them with ``archive_limits(...)``.

    >>> with ember.serialization.archive_limits(max_metadata_bytes=4 << 30):
    ...     obj = ember.load("huge_pickle.pt")
    """

    max_metadata_bytes: int = 1 << 30  # data.pkl, *.json, pickles/*, version records
    max_inflated_bytes: int = 16 << 30  # declared sizes of all compressed entries together
    max_ratio: int = _DEFLATE_MAX_RATIO + 8  # declared size / compressed size of one entry
    chunk_bytes: int = 16 << 20  # the most decompressed in one step


LIMITS = ArchiveLimits()


@contextlib.contextmanager
def archive_limits(**changes: int) -> Iterator[ArchiveLimits]:
    """Raise (or lower) the archive budgets inside a ``with`` block (not thread-local).

    >>> with archive_limits(max_inflated_bytes=64 << 30):
    ...     sd = ember.load("deflated_checkpoint.pt")
    """
    global LIMITS
    old = LIMITS
    LIMITS = dataclasses.replace(old, **changes)
    try:
        yield LIMITS
    finally:
        LIMITS = old


def _refuse(where: str, entry: str | None, msg: str) -> SerializationError:
    what = f"entry {entry!r}: " if entry is not None else ""
    return SerializationError(f"[{where}] {what}{msg}")


def _is_path_like(name: str) -> bool:
    return (name.startswith("/") or "\\" in name or "\0" in name
            or re.match(r"^[A-Za-z]:", name) is not None
            or any(part == ".." for part in name.split("/")))


def check_archive(zf: zipfile.ZipFile, where: str = "load") -> None:
    """Refuse ``zf`` if it breaks a rule above; reads only headers, decompresses nothing."""
    infos = zf.infolist()
    seen: set[str] = set()
    inflated = 0
    for info in infos:
        name = info.filename
        if name in seen:
            raise _refuse(where, name, "appears twice in the archive (duplicate entry names "
                          "are ambiguous: zip readers disagree on which one counts)")
        seen.add(name)
        if _is_path_like(name):
            raise _refuse(where, name, "is a path (absolute, '..' or backslash); entry names "
                          "must be relative names inside the archive")
        if info.flag_bits & 0x1:
            raise _refuse(where, name, "is encrypted; encrypted entries are not supported")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise _refuse(where, name, f"is stored but declares {info.file_size} bytes "
                              f"and {info.compress_size} compressed bytes")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            limit = LIMITS.max_ratio * max(info.compress_size, 1)
            if info.file_size > limit:
                raise _refuse(where, name, f"declares {info.file_size} bytes from "
                              f"{info.compress_size} compressed bytes, more than deflate can "
                              f"produce (ratio limit {LIMITS.max_ratio}): a zip bomb?")
            inflated += info.file_size
        else:
            raise _refuse(where, name, f"uses compression method {info.compress_type}; only "
                          "stored (0) and deflate (8) are supported")
    if inflated > LIMITS.max_inflated_bytes:
        raise _refuse(where, None, f"the compressed entries declare {inflated} bytes in all, "
                      f"over the budget of {LIMITS.max_inflated_bytes} (raise it with "
                      "ember.serialization.archive_limits(max_inflated_bytes=...))")
    _check_local_headers(zf, infos, where)


def _check_local_headers(zf: zipfile.ZipFile, infos: list, where: str) -> None:
    fp = zf.fp
    assert fp is not None
    fp.seek(0, 2)
    size = fp.tell()
    spans = []
    for info in infos:
        name, h = info.filename, info.header_offset
        if not 0 <= h <= size - 30:
            raise _refuse(where, name, f"its local header offset {h} lies outside the file")
        fp.seek(h)
        head = fp.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise _refuse(where, name, "has no valid local header at the offset the central "
                          "directory gives")
        _, _, flags, method, _, _, crc, csize, usize, n, m = struct.unpack(
            "<4sHHHHHIIIHH", head)
        raw_name = fp.read(n)
        central = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
        if raw_name != central:
            raise _refuse(where, name, f"its local header names {raw_name!r}: the local and "
                          "central headers disagree")
        if method != info.compress_type:
            raise _refuse(where, name, f"its local header says compression {method}, the "
                          f"central directory {info.compress_type}")
        if not flags & 0x8:
            for what, local, cen in (("CRC", crc, info.CRC),
                                     ("compressed size", csize, info.compress_size),
                                     ("size", usize, info.file_size)):
                if local != cen and local != 0xFFFFFFFF:
                    raise _refuse(where, name, f"its local header gives {what} {local}, the "
                                  f"central directory {cen}")
        start = h + 30 + n + m
        end = start + info.compress_size
        if end > size:
            raise _refuse(where, name, f"its {info.compress_size} bytes reach past the end of "
                          "the file")
        spans.append((h, end, name))
    spans.sort()
    for (_, end, a), (h, _, b) in zip(spans, spans[1:]):
        if h < end:
            raise _refuse(where, b, f"overlaps entry {a!r} (overlapping entries are how zip "
                          "bombs and parser confusion work)")


def read_entry(zf: zipfile.ZipFile, name: str, where: str = "load",
               metadata: bool = True) -> bytes:
    """The bytes of entry ``name``, read in bounded chunks; metadata entries are capped at
    ``max_metadata_bytes``."""
    return bytes(read_array(zf, name, where, metadata).data)


def read_array(zf: zipfile.ZipFile, name: str, where: str = "load",
               metadata: bool = False) -> np.ndarray:
    """Entry ``name`` as a new uint8 array of its declared size, decompressed in chunks of
    ``chunk_bytes``; a stream longer or shorter than declared is refused."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise _refuse(where, name, "is missing from the archive") from None
    if metadata and info.file_size > LIMITS.max_metadata_bytes:
        raise _refuse(where, name, f"declares {info.file_size} bytes, over the metadata limit "
                      f"of {LIMITS.max_metadata_bytes} (raise it with ember.serialization."
                      "archive_limits(max_metadata_bytes=...))")
    try:
        out = np.empty(info.file_size, np.uint8)
    except MemoryError:
        raise _refuse(where, name, f"declares {info.file_size} bytes, more memory than this "
                      "process can allocate") from None
    try:
        _inflate_into(zf, info, out, where)
    except SerializationError:
        raise
    except (OSError, EOFError, ValueError, zlib.error, struct.error) as e:
        raise _refuse(where, name, f"is corrupt: {type(e).__name__}: {e}") from None
    return out


def _inflate_into(zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: np.ndarray,
                  where: str) -> None:
    """Read ``info``'s bytes into ``out`` (its declared size) in bounded chunks, itself rather
    than through ``zipfile``, which stops at the declared size and ignores the rest of a
    longer deflate stream; the stream must end exactly there and match the CRC."""
    name, fp = info.filename, zf.fp
    assert fp is not None
    fp.seek(info.header_offset)
    head = fp.read(30)
    n, m = struct.unpack("<HH", head[26:30])
    fp.seek(info.header_offset + 30 + n + m)
    chunk = max(1, LIMITS.chunk_bytes)
    if info.compress_type == zipfile.ZIP_STORED:
        crc = _copy_stored(fp, info, out, chunk, where)
    else:
        crc = _inflate(fp, info, out, chunk, where)
    if crc != info.CRC:
        raise _refuse(where, name, f"fails its CRC check ({crc:#010x}, the header says "
                      f"{info.CRC:#010x})")


def _copy_stored(fp: Any, info: zipfile.ZipInfo, out: np.ndarray, chunk: int,
                 where: str) -> int:
    """Copy a stored entry into ``out`` chunk by chunk (no intermediate bytes); its CRC."""
    view = memoryview(out)
    pos, crc = 0, 0
    while pos < info.file_size:
        got = fp.readinto(view[pos:pos + min(chunk, info.file_size - pos)])
        if not got:
            raise _refuse(where, info.filename, "is truncated")
        crc = zlib.crc32(view[pos:pos + got], crc)
        pos += got
    return crc


def _inflate(fp: Any, info: zipfile.ZipInfo, out: np.ndarray, chunk: int, where: str) -> int:
    """Inflate a deflated entry into ``out`` at most ``chunk`` bytes at a time; its CRC."""
    name = info.filename
    left = info.compress_size
    inflater = zlib.decompressobj(-15)
    pos, crc = 0, 0
    pending = b""
    while True:
        if not pending and left:
            pending = fp.read(min(chunk, left))
            if not pending:
                raise _refuse(where, name, "is truncated")
            left -= len(pending)
        if inflater.eof:
            break
        room = info.file_size - pos + 1  # one byte more reveals a longer stream
        piece = inflater.decompress(pending, min(chunk, room))
        pending = inflater.unconsumed_tail
        if not piece and not pending and not left:
            break
        if pos + len(piece) > info.file_size:
            raise _refuse(where, name, "decompresses to more bytes than its header declares "
                          f"({info.file_size})")
        out[pos:pos + len(piece)] = np.frombuffer(piece, np.uint8)
        crc = zlib.crc32(piece, crc)
        pos += len(piece)
    if not inflater.eof:
        raise _refuse(where, name, "its deflate stream does not end where the header says")
    if inflater.unused_data or pending or left:
        raise _refuse(where, name, "has bytes after the end of its deflate stream")
    if pos != info.file_size:
        raise _refuse(where, name, f"has {pos} bytes, its header declares {info.file_size}")
    return crc

