"""Building ``libember_aot.so`` (the C runner, ``ember/aot/csrc/ember_aot.c``) with the system C
compiler, once per source version, into ``<cache_dir>/aot/<key>/`` (``python -m ember.aot
--lib-dir`` prints that directory).  The library needs no Python and no compiler at run time;
it is built portable (no ``-march``).

>>> build_runtime_library()                      # doctest: +SKIP
PosixPath('/home/u/.cache/ember/aot/3f1c.../libember_aot.so')
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from ember.aot._codegen import INCLUDE_DIR
from ember.config import config
from ember.errors import CompileError

CSRC = Path(__file__).with_name("csrc")
FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11", "-Wall")


def _sources() -> list:
    return sorted(CSRC.glob("*.[ch]")) + sorted((INCLUDE_DIR / "ember" / "aot").glob("*.h"))


def build_runtime_library() -> Path:
    """The path of ``libember_aot.so``, built now if this version is not built yet."""
    from ember.compiler.c.build import toolchain
    cc = toolchain.CACHE.compiler()
    h = hashlib.sha256(f"{cc.version} {FLAGS}".encode())
    for f in _sources():
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    d = Path(config.cache_dir) / "aot" / h.hexdigest()[:24]
    lib = d / "libember_aot.so"
    if lib.exists():
        return lib
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".libember_aot.", suffix=".so.tmp")
    os.close(fd)
    cmd = [*cc.command, *FLAGS, f"-I{INCLUDE_DIR}", f"-I{CSRC}", "-o", tmp,
           str(CSRC / "ember_aot.c"), "-ldl"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise CompileError(f"[ember.aot] building libember_aot failed:\n"
                               f"{out.stderr[-2000:]}\ncommand: {' '.join(cmd)}")
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib
