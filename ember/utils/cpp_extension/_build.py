"""Compiling extensions: the system compiler over the stable headers, cached by content."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from ember.config import config
from ember.errors import CompileError
from ember.utils.cpp_extension._host import INCLUDE, _headers_digest

CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".C", ".c++")
CXX_FLAGS = ("-std=c++17",)
C_FLAGS = ("-std=c11",)
COMMON_FLAGS = ("-O2", "-fPIC", "-Wall")


def c_compiler() -> str:
    """The C compiler (``config.cc``, EMBER_CC; default gcc)."""
    return shlex.split(config.cc)[0] if config.cc else "gcc"


def cxx_compiler() -> str | None:
    """The C++ compiler that goes with the C compiler (g++ for gcc, clang++ for clang), or
    ``None`` when there is none: then only C extensions can be built."""
    cc = os.path.basename(c_compiler())
    names = {"gcc": "g++", "cc": "c++", "clang": "clang++"}.get(cc, cc.replace("gcc", "g++"))
    for name in (names, "c++"):
        if shutil.which(name):
            return name
    return None


def build_directory(name: str) -> Path:
    """Where ``load`` builds extension ``name`` (under ember's cache directory)."""
    from ember.compiler.c.build.toolchain import cache_root
    return cache_root() / "extensions" / name


def _commands(name: str, sources: Sequence[Path], out: Path, cflags: Sequence[str],
              ldflags: Sequence[str], includes: Sequence[str]) -> list[list[str]]:
    cxx = cxx_compiler()
    has_cxx = any(s.suffix in CXX_SUFFIXES for s in sources)
    if has_cxx and cxx is None:
        raise CompileError(f"[cpp_extension.load] {name!r} has C++ sources but no C++ compiler "
                           f"was found (looked for g++/c++ next to {c_compiler()!r}); install "
                           "g++ or write the extension in C against ember/stable/c/*.h")
    inc = [f"-I{INCLUDE}", *(f"-I{p}" for p in includes)]
    cmds, objects = [], []
    for i, src in enumerate(sources):
        obj = out.with_name(f"{out.stem}.{i}.o")
        is_cxx = src.suffix in CXX_SUFFIXES
        compiler, std = (cxx, CXX_FLAGS) if is_cxx else (c_compiler(), C_FLAGS)
        cmds.append([str(compiler), *COMMON_FLAGS, *std, *inc, *cflags, "-c", str(src), "-o",
                     str(obj)])
        objects.append(str(obj))
    linker = cxx if has_cxx else c_compiler()
    cmds.append([str(linker), "-shared", *objects, "-o", str(out), *ldflags])
    return cmds


def build(name: str, sources: Sequence[str | Path], *, extra_cflags: Sequence[str] = (),
          extra_ldflags: Sequence[str] = (), extra_include_paths: Sequence[str] = (),
          build_directory: str | Path | None = None, verbose: bool = False) -> Path:
    """Compile ``sources`` into ``<build_directory>/<name>-<key>.so`` unless that library is
    already there; returns its path.  Raises ``CompileError`` with the compiler's output."""
    srcs = [Path(s).resolve() for s in sources]
    if not srcs:
        raise CompileError(f"[cpp_extension.load] {name!r}: no sources given")
    for s in srcs:
        if not s.is_file():
            raise CompileError(f"[cpp_extension.load] {name!r}: source {str(s)!r} not found")
    folder = Path(build_directory) if build_directory else _default_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    key = _key(srcs, extra_cflags, extra_ldflags, extra_include_paths)
    out = folder / f"{name}-{key}.so"
    if out.exists():
        if verbose:
            print(f"[cpp_extension] {name}: no modifications detected, using {out}")
        return out
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}-", suffix=".so")
    os.close(fd)
    try:
        for cmd in _commands(name, srcs, Path(tmp), extra_cflags, extra_ldflags,
                             extra_include_paths):
            _run(name, cmd, verbose)
        os.replace(tmp, out)
    finally:
        for p in folder.glob(f"{Path(tmp).stem}*"):
            p.unlink(missing_ok=True)
    return out


def _default_dir(name: str) -> Path:
    return build_directory(name)


def _key(srcs: list[Path], *parts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for s in srcs:
        h.update(s.name.encode() + b"\0" + s.read_bytes() + b"\0")
    for p in parts:
        h.update(repr(list(p)).encode())
    h.update(_headers_digest().encode())
    h.update(repr((c_compiler(), cxx_compiler())).encode())
    return h.hexdigest()[:16]


def _run(name: str, cmd: list[str], verbose: bool) -> None:
    if verbose:
        print("[cpp_extension] " + shlex.join(cmd))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"[cpp_extension.load] cannot run {cmd[0]!r}: {e}") from e
    if verbose and (res.stdout or res.stderr):
        print(res.stdout + res.stderr)
    if res.returncode != 0:
        log = (res.stderr + res.stdout).strip()
        raise CompileError(f"[cpp_extension.load] Error building extension {name!r}: "
                           f"{cmd[0]} exited with {res.returncode}:\n{log[-4000:]}\ncommand: "
                           f"{shlex.join(cmd)}", log=log)


__all__ = ["build", "build_directory", "c_compiler", "cxx_compiler"]
