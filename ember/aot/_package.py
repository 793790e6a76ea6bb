"""Building AOT packages: ``aot_compile`` (one model's files) and ``package_aoti`` (a .pt2 of
several models); ``compile_and_package`` does both for one program (docs/aot.md).

Per model the archive holds (``<m>`` the model name, ``<h>`` a hash of its C source)::

    data/aotinductor/<m>/<h>.wrapper.c              the generated C (unit + model interface)
    data/aotinductor/<m>/<h>.wrapper.so             the built library (no weights inside)
    data/aotinductor/<m>/<h>.wrapper_metadata.json  flat {str: str}: platform, CPU features,
                                                    ABI versions, library sha256, user metadata
    data/weights/<m>/weight_<i>                      raw little-endian bytes, stored, aligned
    data/weights/<m>_weights_config.json             {fqn: {file, dtype, shape, nbytes}}
    models/<m>.json                                  the ExportedProgram (ember.export serde)
    data/sample_inputs/<m>.safetensors               the export's example inputs
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ember.aot import _archive
from ember.aot._codegen import ARG_USER, INCLUDE_DIR, ModelSource, model_source
from ember.config import config
from ember.errors import EmberTypeError, EmberValueError
from ember.ops._native import MACRO_FLAGS as _MACRO_FLAGS  # gcc macro -> cpuinfo flag

MODEL_ABI = 1
# the runtime ABI a package records is the oldest runtime that can run it: 1 for a plain
# model; 2 when it needs what runtime 2 added (buffers updated in place: ARG_MUTABLE; Python
# custom ops called back through ember_aot_set_extern_v1)
RUNTIME_ABI = 1
RUNTIME_ABI_2 = 2

_MARCH = re.compile(r"^[A-Za-z0-9_.+-]{1,40}$")


def march_flags(march: str) -> tuple[str, ...]:
    """Extra compiler flags for ``aot_inductor.march`` ("native": the toolchain's default)."""
    if march == "native":
        return ()
    if not _MARCH.match(march):
        raise EmberValueError(f"[aoti_compile_and_package] aot_inductor.march={march!r} is not "
                              f"a -march value (e.g. 'native', 'x86-64-v2', 'x86-64-v3')")
    return (f"-march={march}", "-mtune=generic")


def cpu_features_for(flags: tuple[str, ...]) -> list[str]:
    """The CPU features (``/proc/cpuinfo`` names) code built with ``flags`` may use, as the
    compiler itself reports them (its predefined macros)."""
    from ember.compiler.c.build import toolchain
    cc = toolchain.CACHE.compiler()
    cmd = [*cc.command, *toolchain.FLAGS[:2], *flags, "-dM", "-E", "-x", "c", os.devnull]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise EmberValueError(f"[aoti_compile_and_package] {' '.join(cmd)} failed: "
                              f"{out.stderr.strip()[-300:]}")
    macros = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("#define")}
    return sorted(f for m, f in _MACRO_FLAGS.items() if m in macros)


def _configs(inductor_configs: dict | None) -> dict:
    cfg = dict(inductor_configs or {})
    meta = cfg.get("aot_inductor.metadata", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise EmberTypeError("[aoti_compile_and_package] aot_inductor.metadata must be a "
                             "dict[str, str]")
    cfg["aot_inductor.metadata"] = meta
    return cfg


def build_library(ms: ModelSource, march: str) -> tuple[Path, tuple]:
    """Build the model library (cached by the toolchain); its path and the flags used."""
    from ember.compiler.c.backend import EXTRA_FLAGS
    from ember.compiler.c.build import toolchain
    flags = (*EXTRA_FLAGS, *march_flags(march), f"-I{INCLUDE_DIR}")
    path = toolchain.compile_library(ms.source, name="aot_model", extra_flags=flags,
                                     openmp=config.c_openmp)
    return path, flags


def _metadata(ms: ModelSource, so: bytes, name: str, march: str, flags: tuple,
              ep: Any, user: dict) -> dict:
    from ember.compiler.c.build import toolchain
    from ember.export.serde import _enc_struct
    call_spec = {
        "in_names": list(ep._in_spec[0]),
        "in_structs": [[k, _enc_struct(s)] for k, s in ep._in_spec[1].items()],
        "out_spec": _enc_struct(ep._out_spec),
        "args": [[a.name, a.kind, a.dtype.name] for a in ms.args],
        "outputs": [[dt.name, nd] for dt, nd in ms.outputs],
    }
    meta = {
        "AOTI_DEVICE_KEY": "cpu", "AOTI_PLATFORM": sys.platform,
        "AOTI_MACHINE": platform.machine(), "AOTI_CPU_ISA": march,
        "ember.version": toolchain.ember_version(), "ember.model_abi": str(MODEL_ABI),
        "ember.runtime_abi": str(RUNTIME_ABI_2 if ms.mutated or ms.externs else RUNTIME_ABI),
        "ember.mutated_buffers": json.dumps(ms.mutated),
        "ember.needs_python": "1" if ms.externs else "0",
        "ember.python_ops": "[]", **ms.externs,
        "ember.cpu_features": ",".join(cpu_features_for(tuple(f for f in flags
                                                              if f.startswith("-m")))),
        "ember.compiler": toolchain.CACHE.compiler().version,
        "ember.library_sha256": hashlib.sha256(so).hexdigest(),
        "ember.model_name": name, "ember.call_spec": json.dumps(call_spec),
    }
    meta.update(user)
    return meta


def aot_compile(gm: Any, args: tuple | None = None, kwargs: dict | None = None, *,
                options: dict | None = None) -> list[str]:
    """Compile a program to a model library and write its package files into a new temporary
    directory; returns their paths (for ``package_aoti``).  ``gm`` is an ``ExportedProgram``,
    ``ep.module()``, or a module exported here with ``args``/``kwargs`` (as PyTorch's
    ``aot_compile(gm, args)``); ``options`` are inductor configs.

    >>> files = ember._inductor.aot_compile(ep, options={"aot_inductor.package": True})
    >>> ember._inductor.package.package_aoti("two.pt2", {"a": files, "b": files2})
    """
    from ember.export import ExportedProgram, export
    ep = gm
    if not isinstance(ep, ExportedProgram):
        ep = getattr(gm, "_ep", None)
    if not isinstance(ep, ExportedProgram):
        if args is None or not hasattr(gm, "forward"):
            raise EmberTypeError(f"[aoti_compile_and_package] expected an ExportedProgram "
                                 f"(from ember.export.export), got {type(gm).__name__}")
        ep = export(gm, tuple(args), kwargs)
    cfg = _configs(options)
    march = str(cfg.get("aot_inductor.march", "native"))
    try:
        from ember.aot._rewrite import inline_kernel_ops
        lowered = inline_kernel_ops(ep)  # the package's JSON keeps ep itself
        ms = model_source(lowered, march=march)
        so_path, flags = build_library(ms, march)
    except Exception as e:
        from ember.aot._minifier_hook import dump_for_minifier
        dump_for_minifier("aot_compile", program=ep, configs=cfg, error=e)
        raise
    so = Path(so_path).read_bytes()
    meta = _metadata(ms, so, "model", march, flags, ep, cfg["aot_inductor.metadata"])
    out = Path(tempfile.mkdtemp(prefix="ember-aot-"))
    h = hashlib.sha256(ms.source.encode()).hexdigest()[:16]
    files = {f"{h}.wrapper.so": so,
             f"{h}.wrapper_metadata.json": json.dumps(meta, indent=1).encode()}
    if cfg.get("aot_inductor.package_source", True):  # False: a smaller package, no C
        files[f"{h}.wrapper.c"] = ms.source.encode()
    weights = {}
    for a in ms.args:
        if a.kind == ARG_USER:
            continue
        arr = _weight_array(lowered, a)
        files[a.weight_file] = arr
        weights[a.target] = {"file": a.weight_file, "dtype": a.dtype.name,
                             "shape": list(arr.shape), "nbytes": int(arr.nbytes)}
    files["weights_config.json"] = json.dumps(weights, indent=1).encode()
    files.update(_program_files(ep))
    paths = []
    for fname, data in files.items():
        p = out / fname
        with open(p, "wb") as f:
            # bytes through uint8: memoryview cannot cast ml_dtypes' bfloat16 ('E')
            f.write(memoryview(data.reshape(-1).view(np.uint8)) if isinstance(data, np.ndarray)
                    else data)
        paths.append(str(p))
    return paths


def _weight_array(ep: Any, a: Any) -> np.ndarray:
    from ember.export.graph_signature import InputKind
    spec = next(s for s in ep.graph_signature.input_specs
                if s.kind != InputKind.USER_INPUT and s.target == a.target)
    arr = np.ascontiguousarray(ep._lifted_value(spec).detach()._data)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def _program_files(ep: Any) -> dict:
    """The exported program's JSON and example inputs, so the package can be re-exported."""
    from ember.export._inputs import leaves
    from ember.export.serde import _model_json
    from ember.serialization import safetensors as st
    args, kwargs = ep.example_inputs
    ex = leaves(tuple(args)) + leaves(dict(kwargs))
    return {"program.json": json.dumps(_model_json(ep)).encode(),
            "sample_inputs.safetensors": st.save({str(i): t.detach() for i, t in enumerate(ex)})}


def _kind(fname: str) -> str:
    for suffix in (".wrapper.c", ".wrapper.so", ".wrapper_metadata.json"):
        if fname.endswith(suffix):
            return "aoti"
    if re.fullmatch(r"weight_\d+", fname):
        return "weight"
    return fname


def package_aoti(archive_file: Any, aoti_files: Any) -> Any:
    """Write a .pt2 package of one model's files (``aot_compile``'s list: model "model") or
    several (``{name: files}``) to a path or a binary file object; returns ``archive_file``.

    >>> ember._inductor.package.package_aoti("pkg.pt2", {"enc": files_a, "dec": files_b})
    """
    models = aoti_files if isinstance(aoti_files, dict) else {"model": aoti_files}
    if hasattr(archive_file, "write"):
        d = tempfile.mkdtemp(prefix="ember-aot-")
        try:
            path = package_aoti(os.path.join(d, "package.pt2"), models)
            with open(path, "rb") as f:
                shutil.copyfileobj(f, archive_file, 1 << 20)
            os.unlink(path)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return archive_file
    path = os.fspath(archive_file)
    if not path.endswith(".pt2"):
        raise EmberValueError(f"[package_aoti] expected a path ending in .pt2, got {path!r}")
    w = _archive.ArchiveWriter(path)
    try:
        for name, files in models.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", name) or name in (".", ".."):
                raise EmberValueError(f"[package_aoti] model name {name!r}: use letters, "
                                      f"digits, '_', '-', '.'")
            _add_model(w, name, [Path(f) for f in files])
        return w.close()
    except BaseException:
        w.abort()
        raise


def _add_model(w: _archive.ArchiveWriter, name: str, files: list) -> None:
    for f in files:
        kind = _kind(f.name)
        if kind == "weight":  # streamed: weights may be large
            w.add_file(f"data/weights/{name}/{f.name}", f, align=True)
            continue
        data = f.read_bytes()
        if kind == "aoti":
            if f.name.endswith("_metadata.json"):
                meta = json.loads(data)
                meta["ember.model_name"] = name
                data = json.dumps(meta, indent=1).encode()
            w.add(f"data/aotinductor/{name}/{f.name}", data, align=f.name.endswith(".so"))
        elif kind == "weights_config.json":
            w.add(f"data/weights/{name}_weights_config.json", data)
        elif kind == "program.json":
            w.add(f"models/{name}.json", data)
        elif kind == "sample_inputs.safetensors":
            w.add(f"data/sample_inputs/{name}.safetensors", data)
        else:
            raise EmberValueError(f"[package_aoti] unexpected file {str(f)!r} for model "
                                  f"{name!r}; pass the list aot_compile returned")


def compile_and_package(ep: Any, *, package_path: Any = None,
                        inductor_configs: dict | None = None) -> Any:
    """Compile ``ep`` ahead of time and write a .pt2 package; returns its path (or
    ``package_path`` itself when it is a binary file object such as ``io.BytesIO``).

    >>> path = ember.aot.compile_and_package(ep, package_path="model.pt2")
    >>> model = ember.aot.load_package(path)
    """
    if not (package_path is None or hasattr(package_path, "write")
            or (isinstance(package_path, (str, os.PathLike))
                and os.fspath(package_path).endswith(".pt2"))):
        raise AssertionError(f"Expect package path to be a file ending in .pt2, is None, or is "
                             f"a buffer. Instead got {package_path}")
    files = aot_compile(ep, options=inductor_configs)
    d = Path(files[0]).parent
    try:
        if package_path is not None and hasattr(package_path, "write"):
            return package_aoti(package_path, files)
        if package_path is None:
            fd, package_path = tempfile.mkstemp(suffix=".pt2", prefix="ember-aot-")
            os.close(fd)
        return package_aoti(package_path, files)
    finally:
        for f in files:
            os.unlink(f)
        d.rmdir()
