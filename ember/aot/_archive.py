"""The .pt2 archive: writing it (entries STORED, big ones 64-byte aligned) and reading it
defensively (reference §6.3 layout; docs/aot.md).

Writer: ``ArchiveWriter(path)`` puts every entry under one root folder (the file's stem) and
pads each entry's local header with an extra field so that its data starts at a multiple of
``ALIGN`` bytes: a weight blob can then be used in place from a memory map of the file.

Reader: ``Archive(path)`` maps the file read-only and indexes the central directory; it refuses
(``PackageError``) names with ``..``, absolute paths, backslashes or NUL, duplicate names,
compressed or encrypted entries, sizes that disagree between the central directory and the
local header, and data that runs past the end of the file.  Nothing is extracted: ``view(name)``
is a zero-copy ``memoryview`` of the map, ``read(name)`` checks the CRC of a small entry.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from ember.errors import EmberRuntimeError

ALIGN = 64
FORMAT, VERSION = "pt2", "0"
_PAD_ID = 0xD935  # the extra-field id zipalign uses for padding
MAX_SMALL = 64 << 20  # JSON entries larger than this are refused (a hostile package)


class PackageError(EmberRuntimeError):
    """A package that is not a valid ember .pt2 archive (truncated, corrupted, hostile)."""


def _err(path: Any, msg: str) -> PackageError:
    return PackageError(f"[aoti_load_package] {path}: {msg}")


class ArchiveWriter:
    """Write a .pt2 zip: ``add(name, data)`` (a bytes-like, stored uncompressed), ``close()``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.root = Path(self.path).stem or "archive"
        self.tmp = self.path + ".tmp"
        self.zf = zipfile.ZipFile(self.tmp, "w", zipfile.ZIP_STORED, allowZip64=True)
        self.names: set = set()
        self.add("archive_format", FORMAT.encode())
        self.add("archive_version", VERSION.encode())
        self.add("byteorder", b"little")
        self.add(".data/version", b"1")

    def _info(self, name: str, size: int, align: bool) -> zipfile.ZipInfo:
        full = f"{self.root}/{name}"
        assert full not in self.names, full
        self.names.add(full)
        info = zipfile.ZipInfo(full, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = size
        if align:
            head = self.zf.fp.tell() + 30 + len(full.encode())
            if size * 1.05 > zipfile.ZIP64_LIMIT:  # zipfile's rule for a zip64 local header
                head += 20
            pad = (-(head + 4)) % ALIGN
            info.extra = struct.pack("<HH", _PAD_ID, pad) + b"\0" * pad
        return info

    def add(self, name: str, data: Any, align: bool = False) -> None:
        if hasattr(data, "dtype") and hasattr(data, "view"):   # an array (bfloat16 too)
            data = data.reshape(-1).view("u1")
        view = memoryview(data).cast("B")
        self.zf.writestr(self._info(name, view.nbytes, align), view)

    def add_file(self, name: str, path: str | os.PathLike, align: bool = False) -> None:
        """Copy the file at ``path`` in (streamed: a large weight is never held in memory)."""
        size = os.path.getsize(path)
        info = self._info(name, size, align)
        with open(path, "rb") as src, self.zf.open(info, "w",
                                                     force_zip64=size > zipfile.ZIP64_LIMIT) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)

    def close(self) -> str:
        self.zf.close()
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        self.zf.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


class Archive:
    """A read-only, memory-mapped view of a .pt2 package (see the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    raise _err(self.path, "the file is empty: not a package")
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise _err(self.path, f"cannot read the package ({e.strerror or e})") from None
        self.size = size
        try:
            zf = zipfile.ZipFile(self.path)
            infos = zf.infolist()
        except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError, OSError) as e:
            raise _err(self.path, f"not a zip archive, or truncated/corrupted ({e})") from None
        self.entries: dict = {}
        for info in infos:
            self._index(info)
        self.root = self._find_root()

    def _index(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        parts = PurePosixPath(name).parts
        if (not name or name.startswith("/") or "\\" in name or "\0" in name or ".." in parts
                or ":" in parts[0]):
            raise _err(self.path, f"unsafe entry name {name!r} (absolute or with '..')")
        if name in self.entries:
            raise _err(self.path, f"duplicate entry {name!r}")
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            raise _err(self.path, f"entry {name!r} is compressed or encrypted; packages store "
                                  f"entries uncompressed")
        if info.compress_size != info.file_size:
            raise _err(self.path, f"entry {name!r} claims {info.file_size} bytes but stores "
                                  f"{info.compress_size}")
        off = info.header_offset
        if off < 0 or off + 30 > self.size:
            raise _err(self.path, f"entry {name!r} starts outside the file (truncated?)")
        sig, *_rest = struct.unpack_from("<I", self.map, off)
        if sig != 0x04034B50:
            raise _err(self.path, f"entry {name!r}: bad local header (corrupted)")
        n_name, n_extra = struct.unpack_from("<HH", self.map, off + 26)
        data = off + 30 + n_name + n_extra
        if data + info.file_size > self.size:
            raise _err(self.path, f"entry {name!r} runs past the end of the file "
                                  f"({info.file_size} bytes at {data} of {self.size}): "
                                  f"truncated or lying sizes")
        self.entries[name] = (data, info.file_size, info.CRC)

    def _find_root(self) -> str:
        roots = [n[:-len("archive_format")] for n in self.entries
                 if n.endswith("archive_format") and n.count("/") <= 1]
        if len(roots) != 1:
            raise _err(self.path, "no archive_format entry: not a .pt2 package")
        root = self.root = roots[0]
        fmt = self.read("archive_format").decode(errors="replace").strip()
        if fmt != FORMAT:
            raise _err(self.path, f"archive_format is {fmt[:20]!r}; expected {FORMAT!r}")
        return root

    def has(self, name: str) -> bool:
        return self.root + name in self.entries

    def names(self, prefix: str = "") -> list:
        return [n[len(self.root):] for n in self.entries if n.startswith(self.root + prefix)]

    def view(self, name: str) -> memoryview:
        """The bytes of entry ``name`` (relative to the root), in place (no copy)."""
        try:
            off, size, _ = self.entries[self.root + name]
        except KeyError:
            raise _err(self.path, f"the package has no entry {name!r}") from None
        return memoryview(self.map)[off:off + size]

    def read(self, name: str) -> bytes:
        """A small entry's bytes, CRC-checked."""
        full = self.root + name
        if full not in self.entries:
            raise _err(self.path, f"the package has no entry {name!r}")
        off, size, crc = self.entries[full]
        if size > MAX_SMALL:
            raise _err(self.path, f"entry {name!r} is {size} bytes; expected a small file")
        data = bytes(self.map[off:off + size])
        if zlib.crc32(data) != crc:
            raise _err(self.path, f"entry {name!r} is corrupted (CRC mismatch)")
        return data

    def offset(self, name: str) -> int:
        return self.entries[self.root + name][0]

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # arrays still view the map: it closes when they go
            pass
