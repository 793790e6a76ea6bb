"""ember: PyTorch's API on NumPy, with a compiler that generates C.

``import ember as torch`` runs typical PyTorch tensor code.
"""

from __future__ import annotations

from ember import _memory

# before NumPy loads OpenBLAS: the thread pools' wait policy (ember/_memory.py)
_memory.tune_wait_policy()

import numpy as _np  # noqa: E402

# PyTorch computes inf/nan silently; NumPy would warn on every such op.  Checking per op costs
# ~0.75 us (np.errstate), so ember switches NumPy's floating-point warnings off once, here.
_np.seterr(all="ignore")

from ember.config import config as _config  # noqa: E402

if _config.malloc_tuning:
    _memory.tune_malloc()

from ember import dtypes as _dtypes
from ember.dtypes import (  # noqa: F401
    bfloat16, bool, double, dtype, finfo, float, float16, float32, float64, get_default_dtype,
    half, iinfo, int, int8, int16, int32, int64, long, promote_types, set_default_dtype, short,
    uint8, can_cast, qint8, quint8, qint32,
)
from ember.device import DeviceGuard, Stream, device  # noqa: F401
from ember.dtypes import (  # noqa: F401
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from ember.errors import (  # noqa: F401
    DeviceError, DTypeError, EmberError, EmberIndexError, EmberRuntimeError, EmberTypeError,
    EmberValueError, ShapeError,
)
from ember.tensor import Size, Tensor  # noqa: F401
from ember import ops  # noqa: F401
from ember import _frontend

for _mod in _frontend.MODULES:
    for _name in getattr(_mod, "__all__", ()):
        globals()[_name] = getattr(_mod, _name)
del _mod, _name

from ember.autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from ember import autograd  # noqa: F401
from ember._tensor_str import get_printoptions, set_printoptions  # noqa: F401
from ember import nn  # noqa: F401
from ember.nn import _torch_level as _tl  # torch.conv2d, torch.layer_norm, ... (ATen forms)
for _name in _tl.__all__:
    globals()[_name] = getattr(_tl, _name)
del _tl, _name
from ember import linalg, special  # noqa: F401
from ember.special import sinc  # noqa: F401, E402
from ember import sparse  # noqa: F401
from ember.sparse import sparse_coo, sparse_coo_tensor, spmm, strided  # noqa: F401
from ember import optim  # noqa: F401
from ember import utils  # noqa: F401
from ember.ops._parallel import get_num_threads, set_num_threads  # noqa: F401
from ember import serialization  # noqa: F401
from ember.serialization import (  # noqa: F401
    add_safe_globals, clear_safe_globals, get_safe_globals, load, safe_globals, save,
)
from ember import compiler  # noqa: F401
from ember.compiler import compile  # noqa: F401
from ember import library  # noqa: E402,F401
from ember import kernel  # noqa: E402,F401
from ember.library import _opcheck as _library_opcheck  # noqa: E402

_library_opcheck.COMPILE.append(compile)
from ember import _dynamo  # noqa: F401
from ember import export, fx  # noqa: F401, E402
from ember.sym import SymBool, SymInt  # noqa: F401, E402
from ember._frontend.checks import _check, _check_is_size  # noqa: F401, E402
from ember._frontend.cond import cond  # noqa: F401, E402

# device plumbing and legacy namespaces (docs/devices.md)
from ember import (  # noqa: F401, E402
    accelerator, amp, backends, cpu, cuda, distributed, jit, mps, onnx, xpu,
)
from ember.amp import (  # noqa: F401, E402
    autocast,
    clear_autocast_cache,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from ember.backends import (  # noqa: F401, E402
    are_deterministic_algorithms_enabled, get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled, set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from ember.device import get_default_device, set_default_device  # noqa: F401, E402
from ember import ao, quantization  # noqa: F401, E402
from ember.ao.quantization.qtensor import (  # noqa: F401, E402
    dequantize, per_channel_affine, per_channel_symmetric, per_tensor_affine,
    per_tensor_symmetric, quantize_per_channel, quantize_per_tensor,
)
from ember.errors import DeviceUnavailableError  # noqa: F401, E402

__version__ = "0.1.0"


def result_type(tensor1: object, tensor2: object) -> dtype:
    """The dtype ``tensor1 op tensor2`` would have under PyTorch's promotion rules."""
    return _dtypes.result_type(tensor1, tensor2)


def is_tensor(obj: object) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


def __getattr__(name: str):  # ember.aot / ember._inductor load on first use (torch does too)
    if name in ("aot", "_inductor"):
        import importlib
        return importlib.import_module(f"ember.{name}")
    raise AttributeError(f"module 'ember' has no attribute {name!r}")
