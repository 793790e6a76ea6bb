"""PyTorch's ``torch._inductor.config`` switches that ember honours.

``freezing`` (default False; EMBER_FREEZING=1): an ``ember.compile`` graph that records no
autograd (run under ``no_grad``/``inference_mode``, or reading no parameter that requires
grad) packs the ``nn.Parameter`` B operands of its products once, as PyTorch treats
parameters as constants of an inference graph.  Unlike PyTorch, a weight changed in place
through ember (an optimizer step, ``copy_``, ``load_state_dict``) is seen: the packed copy is
dropped and made again.  Writes through ``.numpy()`` views are not seen (PyTorch sees no
change at all).  The setting is ``ember.config.config.freezing``; this module reads and writes it.

>>> import ember._inductor.config
>>> ember._inductor.config.freezing = True      # doctest: +SKIP
>>> with ember._inductor.config.patch(freezing=True):   # doctest: +SKIP
...     out = compiled_model(x)
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Iterator

from ember.config import config as _config

_PROXIED = ("freezing",)


@contextlib.contextmanager
def patch(changes: dict | None = None, **kwargs: Any) -> Iterator[None]:
    """Set some of these switches for the ``with`` block (PyTorch's ``config.patch``)."""
    new = dict(changes or {}, **kwargs)
    mod = sys.modules[__name__]
    old = {k: getattr(mod, k) for k in new if hasattr(mod, k)}
    try:
        for k, v in new.items():
            setattr(mod, k, v)
        yield
    finally:
        for k in new:
            if k in old:
                setattr(mod, k, old[k])
            else:
                delattr(mod, k)


class _ConfigModule(types.ModuleType):
    """The module's class: ``freezing`` reads and writes ``ember.config.config.freezing``."""

    def __getattr__(self, name: str) -> Any:
        if name in _PROXIED:
            return getattr(_config, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PROXIED:
            setattr(_config, name, bool(value))
        else:
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _ConfigModule
