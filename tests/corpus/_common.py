"""Shared helpers of the real-code corpus: identical initial weights and the import alias.

Every corpus program builds its model with whatever library is bound to the name ``torch``
(real PyTorch or ``ember``). ``init_from_numpy`` then overwrites every parameter with values drawn
from a NumPy generator seeded by the parameter's name, so both libraries start from the same
weights whatever their own initializers drew. Buffers (batch-norm running statistics, positional
tables, masks) are left alone: both libraries compute them deterministically.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import pathlib
import sys
import zlib
from types import ModuleType
from typing import Any, Iterator

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def _library_of(tensor: Any) -> ModuleType:
    """``torch`` or ``ember``: the top-level package a tensor's class comes from."""
    return importlib.import_module(type(tensor).__module__.split(".")[0])


def numpy_value(name: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """The initial value of parameter ``name``: a fixed function of (seed, name, shape).

    Matrices and kernels get U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's Linear/Conv scale);
    1-d ``weight``s (norm scales) get 1 + N(0, 0.05); other 1-d tensors (biases) get N(0, 0.05).
    """
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[1]
        bound = 1.0 / math.sqrt(max(fan_in, 1))
        return rng.uniform(-bound, bound, size=shape)
    if name.endswith("weight"):
        return 1.0 + 0.05 * rng.standard_normal(shape)
    return 0.05 * rng.standard_normal(shape)


def init_from_numpy(model: Any, seed: int) -> Any:
    """Overwrite every parameter of ``model`` with ``numpy_value(name, shape, seed)``.

    Tied parameters (one tensor under two names) get the value of the name that sorts last, the
    same in both libraries. Returns the model.
    """
    params = dict(model.named_parameters(remove_duplicate=False))
    if not params:
        return model
    torch = _library_of(next(iter(params.values())))
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            value = numpy_value(name, tuple(p.shape), seed)
            p.copy_(torch.from_numpy(value).to(p.dtype))
    return model


# --------------------------------------------------------------------------- import alias
def _ember_aliases() -> dict[str, ModuleType]:
    """``torch.<path>`` -> ``ember.<path>`` for every ember module imported so far."""
    import ember
    root = pathlib.Path(ember.__file__).resolve().parent
    for sub in ("nn", "nn.functional", "nn.init", "nn.utils", "nn.utils.rnn", "nn.parameter",
                "optim", "optim.lr_scheduler", "utils", "utils.data", "cuda", "backends", "amp"):
        # only this checkout's modules: an editable install elsewhere must not fill the gaps
        rel = root.joinpath(*sub.split("."))
        if rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file():
            importlib.import_module("ember." + sub)
    return {"torch" + name[len("ember"):]: mod for name, mod in list(sys.modules.items())
            if (name == "ember" or name.startswith("ember.")) and mod is not None}


@contextlib.contextmanager
def _torch_is(library: str) -> Iterator[None]:
    """Inside: ``import torch`` (and ``import torch.nn as nn``, ...) gives ``library``."""
    if library == "torch":
        import torch  # noqa: F401
        yield
        return
    aliases = _ember_aliases()
    saved = {name: mod for name, mod in sys.modules.items()
             if name == "torch" or name.startswith("torch.")}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(aliases)
    try:
        yield
    finally:
        for name in aliases:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def load_program(name: str, library: str) -> ModuleType:
    """Import ``tests/corpus/<name>.py`` with ``torch`` bound to ``library`` ('torch'/'ember').

    Each (program, library) pair is its own module, registered in ``sys.modules`` so whole-model
    ``torch.save`` / ``torch.load`` can find the program's classes by their module path.
    """
    modname = f"_corpus_{library}_{name}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    with _torch_is(library):
        sys.modules[modname] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[modname]
            raise
    return mod
