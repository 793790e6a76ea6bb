"""The ``ExportedProgram`` inside a package (``models/<m>.json`` + the weight blobs + the
example inputs), rebuilt with ``ember.export``'s serde: a package can be re-exported or
compiled again.  Weights are copied out of the map (the program owns its state)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.aot._archive import Archive, _err


def load_exported_program(path: str | os.PathLike, model_name: str = "model") -> Any:
    from ember.export.serde import _build
    from ember.serialization import safetensors as st
    from ember.serialization._errors import SerializationError
    from ember.tensor import _wrap
    ar = Archive(path)
    name = f"models/{model_name}.json"
    if not ar.has(name):
        raise _err(ar.path, f"no exported program for model {model_name!r} ({name})")
    try:
        model = json.loads(ar.read(name))
        config = json.loads(ar.read(f"data/weights/{model_name}_weights_config.json"))
        persistent = {(s["target"]): s["kind"] in ("PARAMETER",) or
                      (s["kind"] == "BUFFER" and s["persistent"]) for s in model["inputs"]
                      if s["kind"] != "USER_INPUT"}
        weights = {}
        for fqn, c in config.items():
            dt = _dt.by_name(c["dtype"])
            raw = ar.view(f"data/weights/{model_name}/{c['file']}")
            arr = np.frombuffer(raw, dt.np).reshape(c["shape"]).copy()
            weights[("state/" if persistent.get(fqn) else "constants/") + fqn] = _wrap(arr, dt)
        examples = st.load(ar.read(f"data/sample_inputs/{model_name}.safetensors"))
        return _build(model, weights, examples)
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise _err(ar.path, f"the exported program of {model_name!r} is malformed "
                            f"({type(e).__name__}: {e})") from None
