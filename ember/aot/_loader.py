"""Loading a .pt2 package from Python: ``load_package(path, model_name)`` -> ``AOTIModel``.

No compiler and no tracing code run: the archive is memory-mapped (``_archive.Archive``),
the model's metadata checked against this machine (platform, CPU features, ABI versions:
``check_compatible``), its library's bytes checked against the recorded sha256, then written
to a private temporary directory, loaded with ``ctypes`` and deleted at once (the mapping stays).
Weights are NumPy arrays *over the map* (no copy).  Calls go through the library's model
interface (``ember/include/ember/aot/model.h``), the same one the C runner uses.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
from contextlib import nullcontext
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.aot._archive import Archive, PackageError, _err
from ember.errors import EmberRuntimeError, EmberTypeError, EmberValueError

MODEL_ABI = 1
RUNTIME_ABI = 2  # 2: arguments of kind ARG_MUTABLE (buffers the model updates in place)
ARG_USER, ARG_CONSTANT, ARG_MUTABLE = 0, 1, 2
_NO_LOCK = nullcontext()


class IncompatiblePackageError(EmberRuntimeError):
    """The package was built for another CPU, platform or runtime ABI."""


class _ArgInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32),
                ("dtype_code", ctypes.c_uint8), ("dtype_bits", ctypes.c_uint8),
                ("ndim", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("nbytes", ctypes.c_int64), ("weight_file", ctypes.c_char_p)]


_BIND = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_OSHAPE = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
_RUN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_THREADS = ctypes.CFUNCTYPE(None, ctypes.c_int)
_MESSAGE = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_int)


class _ModelV1(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_int32), ("n_args", ctypes.c_int32),
                ("n_outputs", ctypes.c_int32), ("n_ints", ctypes.c_int32),
                ("args", ctypes.POINTER(_ArgInfo)), ("outputs", ctypes.POINTER(_ArgInfo)),
                ("bind_sizes", _BIND), ("output_shape", _OSHAPE), ("run", _RUN),
                ("set_num_threads", _THREADS), ("message", _MESSAGE)]


def host_cpu_features() -> set:
    """The ISA flags of this CPU (``/proc/cpuinfo``), or an empty set when unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return set()


def check_compatible(meta: dict, path: str, model: str) -> None:
    """Raise ``IncompatiblePackageError`` naming what differs between the package's build and
    this machine/runtime."""
    where = f"[aoti_load_package] {path} (model {model!r})"
    if "ember.model_abi" not in meta:
        raise IncompatiblePackageError(
            f"{where} was not built by ember.aot (no ember.model_abi in its metadata; a "
            f"PyTorch AOTInductor package?): ember loads packages that "
            f"ember._inductor.aoti_compile_and_package wrote")
    if meta.get("AOTI_DEVICE_KEY", "cpu") != "cpu":
        raise IncompatiblePackageError(f"{where} was built for device "
                                       f"{meta.get('AOTI_DEVICE_KEY')!r}; ember runs 'cpu'")
    for key, have in (("AOTI_PLATFORM", sys.platform), ("AOTI_MACHINE", platform.machine())):
        if meta.get(key) != have:
            raise IncompatiblePackageError(f"{where} was built for {key}={meta.get(key)!r}; "
                                           f"this machine is {have!r}")
    for key, have in (("ember.model_abi", MODEL_ABI), ("ember.runtime_abi", RUNTIME_ABI)):
        got = meta.get(key)
        if got is None or not str(got).isdigit() or int(got) > have:
            raise IncompatiblePackageError(
                f"{where} needs {key.split('.')[1].replace('_', ' ')} version {got}; this "
                f"ember runtime supports versions up to {have}: upgrade ember to load it")
    need = {f for f in str(meta.get("ember.cpu_features", "")).split(",") if f}
    host = host_cpu_features()
    missing = sorted(need - host) if host else []
    if missing:
        raise IncompatiblePackageError(
            f"{where} was built for CPU features this CPU lacks: {', '.join(missing)} "
            f"(built with -march={meta.get('AOTI_CPU_ISA')}); rebuild it here, or build it "
            f"for a baseline ISA with inductor_configs={{'aot_inductor.march': 'x86-64-v2'}}")


class AOTIModel:
    """A model loaded from a package: call it like ``ep.module()``.

    >>> m = ember._inductor.aoti_load_package("model.pt2")
    >>> y = m(x)
    >>> m.get_metadata()["AOTI_DEVICE_KEY"]
    'cpu'
    """

    def __init__(self, path: str, model_name: str = "model",
                 run_single_threaded: bool = False) -> None:
        self._archive = ar = Archive(path)
        self.path, self.model_name = path, model_name
        folder = f"data/aotinductor/{model_name}/"
        names = ar.names(folder)
        metas = [n for n in names if n.endswith(".wrapper_metadata.json")]
        if not metas:
            models = sorted({n.split("/")[2] for n in ar.names("data/aotinductor/")
                             if n.count("/") >= 3})
            raise PackageError(f"[aoti_load_package] {path} has no model {model_name!r}; it "
                               f"has {models}")
        self._meta = _json(ar, metas[0], dict)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self._meta.items()):
            raise _err(path, f"{metas[0]} is not a flat string map")
        check_compatible(self._meta, path, model_name)
        so_name = metas[0][:-len("_metadata.json")] + ".so"
        self._lib = _load_library(ar, so_name, self._meta.get("ember.library_sha256", ""))
        get = getattr(self._lib, "ember_aot_model_get_v1", None)
        if get is None:
            raise _err(path, f"{so_name} exports no ember_aot_model_get_v1")
        get.restype = ctypes.POINTER(_ModelV1)
        self._iface = iface = get().contents
        if iface.abi_version != MODEL_ABI:
            raise IncompatiblePackageError(f"[aoti_load_package] {path}: model ABI "
                                           f"{iface.abi_version}, this runtime speaks {MODEL_ABI}")
        self._pyops = None
        if self._meta.get("ember.needs_python") == "1":
            from ember.aot._pyops import PythonOps
            self._pyops = PythonOps(self._lib, self._meta, path)
        self._setup_args(ar, model_name)
        # products whose B is a constant pack it once and reuse it (switched on here, reset
        # by load_constants; off for good once a constant is user-managed memory, which its
        # owner may change in place)
        self._prepack = getattr(self._lib, "ember_aot_prepack_v1", None)
        # EMBER_AOT_PREPACK=0: pack per call (no second copy of the products' weights)
        self._user_memory = os.environ.get("EMBER_AOT_PREPACK", "1") == "0"
        if self._prepack is not None:
            self._prepack.argtypes, self._prepack.restype = [ctypes.c_int], None
            self._prepack(0 if self._user_memory else 1)
        # a model with mutable buffers runs one call at a time (each call reads and updates
        # them); others share no state between calls
        self._mutable_names = {a[3] for a in self._args if a[0] == ARG_MUTABLE}
        self._mutable = bool(self._mutable_names)
        self._lock = threading.RLock()  # re-entered by a custom op calling the model
        self._setup_spec()
        self._frames()
        # the thread count follows ember.set_num_threads and is 1 in a fork()ed child (as
        # for every compiled library: runtime._ThreadCount); calls share no state
        # (intermediates are allocated per call), so run_single_threaded, which in PyTorch
        # skips the runner pool's locking, changes nothing here
        from ember.compiler.c.build.runtime import _THREADS
        _THREADS.add(iface.set_num_threads)

    def _setup_args(self, ar: Archive, model: str) -> None:
        iface = self._iface
        self._args: list = []          # per arg: (kind, np dtype, ndim, name)
        self._constants: dict = {}     # fqn -> array (over the map, or swapped in)
        for i in range(iface.n_args):
            a = iface.args[i]
            dt = _dtype(a, self.path)
            name = a.name.decode()
            if a.kind not in (ARG_USER, ARG_CONSTANT, ARG_MUTABLE):
                raise _err(self.path, f"argument {name!r} has an unknown kind {a.kind}")
            self._args.append((a.kind, dt, a.ndim, name))
            if a.kind != ARG_USER:
                shape = tuple(a.shape[d] for d in range(a.ndim))
                blob = f"data/weights/{model}/{a.weight_file.decode()}"
                view = ar.view(blob)
                if view.nbytes != a.nbytes:
                    raise _err(self.path, f"weight {blob!r} has {view.nbytes} bytes; the model "
                                          f"expects {a.nbytes}")
                arr = np.frombuffer(ar.map, dt.np, count=int(np.prod(shape, dtype=np.int64)),
                                    offset=ar.offset(blob)).reshape(shape)
                if a.kind == ARG_MUTABLE:  # updated in place by every run: a private copy
                    arr = arr.copy()
                self._constants[name] = arr
        self._out_dtypes = [_dtype(iface.outputs[k], self.path)
                            for k in range(iface.n_outputs)]
        self._out_ndims = [iface.outputs[k].ndim for k in range(iface.n_outputs)]
        self._out_np = [d.np for d in self._out_dtypes]
        # the interface's functions, read once (a ctypes struct field is a new object per read)
        self._bind, self._oshape, self._runfn = iface.bind_sizes, iface.output_shape, iface.run
        self._tls = threading.local()

    def _setup_spec(self) -> None:
        """The inputs' and outputs' pytree structures (metadata ``ember.call_spec``); the
        library, whose hash was checked, is the authority on counts, dtypes and ranks."""
        from ember.export.serde import _dec_struct
        try:
            spec = json.loads(self._meta["ember.call_spec"])
            self._in_spec = (list(spec["in_names"]),
                             {str(k): _dec_struct(s) for k, s in spec["in_structs"]})
            self._out_spec = _dec_struct(spec["out_spec"])
            n_in = sum(_count(s) for s in self._in_spec[1].values())
            n_out = _count(self._out_spec)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
            raise _err(self.path, f"metadata ember.call_spec is malformed ({type(e).__name__}: "
                                  f"{e})") from None
        n_user = sum(1 for a in self._args if a[0] == ARG_USER)
        if n_in != n_user or n_out != len(self._out_dtypes):
            raise _err(self.path, f"metadata ember.call_spec describes {n_in} inputs and {n_out} "
                                  f"outputs; the library has {n_user} and "
                                  f"{len(self._out_dtypes)}")

    # ------------------------------------------------------------------ PyTorch's API
    def get_metadata(self) -> dict:
        """The package's metadata (platform, CPU ISA, user metadata, ember's keys)."""
        return dict(self._meta)

    def get_constant_fqns(self) -> list:
        """The names of the model's constants (parameters and buffers), in argument order."""
        return [name for kind, _, _, name in self._args if kind != ARG_USER]

    def get_constant(self, fqn: str) -> Any:
        """A copy of constant ``fqn``'s current value (a mutated buffer's latest state; an
        ember extension).

        >>> m.get_constant("bn.running_mean")
        """
        from ember.tensor import _wrap
        if fqn not in self._constants:
            raise EmberValueError(f"[get_constant] unknown constant {fqn!r}; the model has "
                                  f"{self.get_constant_fqns()}")
        kind = next(k for k, _, _, n in self._args if n == fqn)
        dt = next(d for _, d, _, n in self._args if n == fqn)
        with self._lock if kind == ARG_MUTABLE else _NO_LOCK:
            return _wrap(np.array(self._constants[fqn], copy=True), dt)

    def load_constants(self, constants_map: dict, *, check_full_update: bool,
                       user_managed: bool = False, allow_h2d_copy: bool = False) -> None:
        """Replace constants by name (tensors of the same shape and dtype); with
        ``check_full_update`` every constant must be given."""
        unknown = sorted(set(constants_map) - set(self._constants))
        if unknown:
            raise EmberValueError(f"[load_constants] unknown constants {unknown}; the model "
                                  f"has {self.get_constant_fqns()}")
        if check_full_update:
            missing = sorted(set(self._constants) - set(constants_map))
            if missing:
                raise EmberValueError(f"[load_constants] check_full_update=True but "
                                      f"{missing} are missing")
        new = {}
        for k, v in constants_map.items():
            old = self._constants[k]
            arr = np.asarray(v.detach()._data if hasattr(v, "_data") else v)
            if arr.shape != old.shape or arr.dtype != old.dtype:
                raise EmberValueError(f"[load_constants] {k}: got {arr.dtype}{list(arr.shape)}"
                                      f", expected {old.dtype}{list(old.shape)}")
            a = np.ascontiguousarray(arr) if user_managed else \
                np.array(arr, copy=True, order="C")
            if k in self._mutable_names and not a.flags.writeable:
                a = a.copy()  # runs write a mutable buffer: never into read-only memory
            new[k] = a
        self._constants.update(new)
        self._frames()
        self._user_memory = self._user_memory or user_managed
        if self._prepack is not None:  # drop the copies packed from the old constants
            self._prepack(0 if self._user_memory else 1)

    # ------------------------------------------------------------------ calling
    def _frames(self) -> None:
        """Argument tables with the constants filled in, copied once per call (the calls of
        several threads never share them)."""
        n = len(self._args)
        self._user_slots = [i for i, a in enumerate(self._args) if a[0] == ARG_USER]
        ap, sp = (ctypes.c_void_p * max(1, n))(), (ctypes.c_void_p * max(1, n))()
        self._const_shapes = []
        for i, (kind, _, _, name) in enumerate(self._args):
            if kind != ARG_USER:
                a = self._constants[name]
                shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
                self._const_shapes.append(shape)
                ap[i], sp[i] = a.__array_interface__["data"][0], ctypes.addressof(shape)
        self._ap, self._sp = ap, sp
        names, structs = self._in_spec
        self._plain = len(structs) == len(names) and all(structs[k] == "T" for k in names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ember.export._inputs import unflatten
        from ember.tensor import Tensor, _wrap
        if self._plain and not kwargs and len(args) == len(self._user_slots):
            flat = args
        else:
            from ember.export.exported_program import ExportedProgram
            flat = ExportedProgram._flat_user_inputs(self, args, kwargs)
        arrays = []
        for i, t in zip(self._user_slots, flat):
            _, dt, ndim, name = self._args[i]
            if type(t) is not Tensor and not isinstance(t, Tensor):
                raise EmberTypeError(f"[AOTIModel] input {name} is {type(t).__name__}; "
                                     f"expected a Tensor")
            if t.dtype is not dt or t.ndim != ndim:
                raise EmberValueError(f"[AOTIModel] input {name} is {t.dtype}[{t.ndim} "
                                      f"dims]; the package expects {dt}[{ndim} dims]")
            arrays.append(np.ascontiguousarray(t._data))
        outs = self._run_user(arrays)
        return unflatten(self._out_spec, iter(_wrap(o, d) for o, d in
                                                zip(outs, self._out_dtypes)))

    def _run_user(self, arrays: list) -> list:
        """Run on the user inputs' C-contiguous arrays (constants are the model's)."""
        f = getattr(self._tls, "frame", None)
        if f is None or f.template is not self._ap:
            f = self._tls.frame = _Frame(self)
        elif f.busy:  # a nested call (from a custom op's Python): tables of its own
            f = _Frame(self)
        ap = f.ap
        for i, shape, a in zip(self._user_slots, f.shapes, arrays):
            ap[i] = a.__array_interface__["data"][0]
            shape[:a.ndim] = a.shape
        f.busy = True
        try:
            return self._run(ap, f.sp, f)
        finally:
            f.busy = False

    def run_arrays(self, arrays: list) -> list:
        """Run on every argument's array (constants included, C-contiguous, in order)."""
        ap = (ctypes.c_void_p * max(1, len(arrays)))(
            *[a.__array_interface__["data"][0] for a in arrays])
        shapes = [(ctypes.c_int64 * max(1, a.ndim))(*a.shape) for a in arrays]
        sp = (ctypes.c_void_p * max(1, len(shapes)))(*[ctypes.addressof(s) for s in shapes])
        return self._run(ap, sp)

    def _run(self, ap: Any, sp: Any, f: Any = None) -> list:
        iface = self._iface
        f = f if f is not None else _Frame(self, user=False)
        ints = f.ints
        rc = self._bind(sp, ints)
        if rc:
            raise AssertionError(iface.message(rc).decode(errors="replace"))
        outs = []
        op = f.op
        for k, (nd, dt, shape) in enumerate(zip(self._out_ndims, self._out_np, f.oshapes)):
            self._oshape(k, ints, shape)
            o = np.empty(tuple(shape[:nd]), dt)
            op[k] = o.__array_interface__["data"][0]
            outs.append(o)
        with self._lock if self._mutable else _NO_LOCK:
            rc = self._runfn(ap, op, ints)
        if rc and self._pyops is not None:
            self._pyops.raise_pending()
        if rc:
            err = EmberRuntimeError(f"[AOTIModel] {self.model_name} failed (code {rc}): "
                                    f"{iface.message(rc).decode(errors='replace')}")
            from ember.aot._minifier_hook import dump_for_minifier
            dump_for_minifier("aot_run", package=self.path, model_name=self.model_name,
                              error=err)
            raise err
        return outs

    def __repr__(self) -> str:
        return f"AOTIModel({self.path!r}, model_name={self.model_name!r})"


class _Frame:
    """One thread's argument tables for calls of a model (reused call after call: a call
    only writes its inputs' pointers and shapes): the arguments' pointers and shapes with the
    constants filled in (``template``: the model's table they were copied from, replaced by
    ``load_constants``), the runtime ints, the outputs' shapes and pointers."""

    __slots__ = ("template", "ap", "sp", "shapes", "ints", "oshapes", "op", "busy")

    def __init__(self, m: AOTIModel, user: bool = True) -> None:
        self.template, self.busy = m._ap, False
        self.ap = type(m._ap).from_buffer_copy(m._ap)
        self.sp = type(m._sp).from_buffer_copy(m._sp)
        self.shapes = []
        for i in m._user_slots if user else ():
            shape = (ctypes.c_int64 * max(1, m._args[i][2]))()
            self.shapes.append(shape)
            self.sp[i] = ctypes.addressof(shape)
        self.ints = (ctypes.c_int64 * max(1, m._iface.n_ints))()
        self.oshapes = [(ctypes.c_int64 * max(1, nd))() for nd in m._out_ndims]
        self.op = (ctypes.c_void_p * max(1, len(m._out_ndims)))()


_DL_DTYPES = {(2, 32): "float32", (2, 64): "float64", (2, 16): "float16", (4, 16): "bfloat16",
              (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
              (1, 8): "uint8", (6, 8): "bool", (5, 64): "complex64", (5, 128): "complex128"}


def _dtype(info: Any, path: str) -> Any:
    name = _DL_DTYPES.get((info.dtype_code, info.dtype_bits))
    if name is None:
        raise _err(path, f"the library declares an unknown DLPack dtype "
                         f"({info.dtype_code}, {info.dtype_bits})")
    return _dt.by_name(name)


def _count(struct: Any) -> int:
    """The number of tensor leaves of a decoded structure."""
    if struct == "T":
        return 1
    kind, body = struct
    if kind == "const":
        return 0
    if kind == "dict":
        return sum(_count(s) for _, s in body)
    return sum(_count(s) for s in body)


def _json(ar: Archive, name: str, kind: type) -> Any:
    try:
        v = json.loads(ar.read(name).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _err(ar.path, f"{name} is not valid JSON ({e})") from None
    if not isinstance(v, kind):
        raise _err(ar.path, f"{name} is not a JSON {kind.__name__}")
    return v


def _load_library(ar: Archive, name: str, sha256: str) -> ctypes.CDLL:
    """Check the library's bytes against ``sha256`` before any of it can run, write it to a
    private temporary directory, load it, delete the file."""
    data = ar.view(name)
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise _err(ar.path, f"{name} does not match its recorded sha256 ({got[:16]}... vs "
                            f"{sha256[:16]}...): refusing to load it")
    d = tempfile.mkdtemp(prefix="ember-aot-")
    try:
        p = os.path.join(d, "model.so")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            return ctypes.CDLL(p, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise IncompatiblePackageError(f"[aoti_load_package] {ar.path}: cannot load "
                                           f"{name}: {e}") from None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def load_package(path: Any, model_name: str = "model",
                 run_single_threaded: bool = False) -> AOTIModel:
    """Load model ``model_name`` of the .pt2 package at ``path`` (a path, or a binary file
    object whose bytes are copied once to a private temporary file, unlinked at once).

    >>> m = ember.aot.load_package("pkg.pt2", "model")
    """
    if hasattr(path, "read"):
        d = tempfile.mkdtemp(prefix="ember-aot-")
        p = os.path.join(d, "package.pt2")
        try:
            with open(p, "wb") as f:
                f.write(path.read())
            model = AOTIModel(p, model_name, run_single_threaded)
        finally:
            shutil.rmtree(d, ignore_errors=True)  # the map keeps the bytes
        return model
    return AOTIModel(os.fspath(path), model_name, run_single_threaded)
